// fuzz_target.h: one fuzz target per reader of a file or flag strata takes
// from a user. Each target feeds its bytes to the very function the product
// calls, and checks what a reader must never do: crash, read or allocate
// past what the input holds, refuse without a message, or accept something
// that breaks the reader's own promises.
//
// STRATA_FUZZ_TARGET(name) { ... } defines a target. The same definition is
// built two ways:
//   - a libFuzzer binary per target (clang, ASan+UBSan; the `fuzz` preset,
//     scripts/fuzz.sh), through tests/fuzz/libfuzzer_entry.cc;
//   - the replay test (fuzz_replay_test.cc), in the default and asan suites,
//     which runs every file of tests/fuzz/corpus/<name>/ and
//     tests/fuzz/regressions/<name>/ through its target.
#ifndef STRATA_TESTS_FUZZ_FUZZ_TARGET_H_
#define STRATA_TESTS_FUZZ_FUZZ_TARGET_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace strata::fuzz {

// Runs one input; returns whether the reader accepted it (the seeds, real
// files strata writes, must be accepted: the replay test checks it).
using TargetFn = bool (*)(std::string_view data);

struct Target {
  std::string name;
  TargetFn fn = nullptr;
};

// Every target linked into this binary, by name.
const std::vector<Target>& Targets();
// Adds a target (STRATA_FUZZ_TARGET's static initialiser); returns true.
bool Register(const char* name, TargetFn fn);

// Aborts the process, printing `what` and where: a finding.
[[noreturn]] void Fail(const char* what, const char* file, int line);
#define STRATA_FUZZ_CHECK(cond) \
  ((cond) ? (void)0 : ::strata::fuzz::Fail(#cond, __FILE__, __LINE__))

// A refusal of bad input is a Status with a message, never kInternal or
// kUnknown (those say the reader itself broke).
void CheckRefusal(const absl::Status& status, const char* file, int line);
#define STRATA_FUZZ_CHECK_REFUSAL(status) \
  ::strata::fuzz::CheckRefusal((status), __FILE__, __LINE__)

// A directory of this process's own (under /dev/shm when it exists: the
// readers' file I/O then costs no disk), emptied by each call.
const std::string& FreshScratchDir();
// Writes `bytes` to `path`; a finding (abort) if it cannot.
void WriteFile(const std::string& path, std::string_view bytes);

// Every flag of the binary as it was at construction, set back at
// destruction (absl::FlagSaver's job, without its log line per flag per
// input).
class FlagRestorer {
 public:
  FlagRestorer();
  ~FlagRestorer();
  FlagRestorer(const FlagRestorer&) = delete;
  FlagRestorer& operator=(const FlagRestorer&) = delete;

 private:
  std::vector<std::pair<std::string, std::string>> saved_;  // name, value
};

// The separator between the files of a multi-file input (a checkpoint's
// manifest and tensors.bin; an IDX pair): a seed is the files joined by it.
inline constexpr std::string_view kPartSeparator = "\n--strata-fuzz-part--\n";
// `data` cut at each kPartSeparator into exactly `parts` pieces (the last
// takes the rest; missing ones are empty).
std::vector<std::string_view> SplitParts(std::string_view data, int parts);

}  // namespace strata::fuzz

#define STRATA_FUZZ_TARGET(name)                                     \
  static bool StrataFuzz_##name(std::string_view data);              \
  [[maybe_unused]] static const bool strata_fuzz_registered_##name = \
      ::strata::fuzz::Register(#name, StrataFuzz_##name);            \
  static bool StrataFuzz_##name(std::string_view data)

#endif  // STRATA_TESTS_FUZZ_FUZZ_TARGET_H_
