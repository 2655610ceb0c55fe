// corpus.cc: reading the KJV through bible(1), and the line split.
#include "train/data/corpus.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/xxh3.h"
#include "strata/status.h"
#include "train/io/atomic_file.h"

namespace strata::train {
namespace {

constexpr char kKjvRange[] = "gen1:1-rev22:21";

// True if `program` names an executable, directly or through $PATH; checked
// first so a missing binary gets the fix in its message, not sh's "not found".
bool Executable(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return access(program.c_str(), X_OK) == 0;
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "", ':')) {
    const auto candidate = std::filesystem::path(std::string(dir)) / program;
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

// Skips `*s`'s leading characters for which `pred` holds; returns how many.
template <typename Pred>
size_t SkipWhile(std::string_view* s, Pred pred) {
  size_t n = 0;
  while (n < s->size() && pred(static_cast<unsigned char>((*s)[n]))) ++n;
  s->remove_prefix(n);
  return n;
}

// Appends the stripped verses of bible(1)'s output `out` to `text`.
absl::Status AppendVerses(FILE* out, const std::string& program,
                          std::string* text) {
  char* line = nullptr;
  size_t capacity = 0;
  int64_t number = 0;
  absl::Status status;
  for (ssize_t n; status.ok() && (n = getline(&line, &capacity, out)) > 0;) {
    std::string_view verse(line, static_cast<size_t>(n));
    if (verse.back() == '\n') verse.remove_suffix(1);
    ++number;
    if (!StripVerseReference(verse, &verse)) {
      status = absl::InternalError(absl::StrFormat(
          "line %d from `%s -f %s` has no verse reference (\"%s\"); "
          "reinstall bible-kjv",
          number, program, kKjvRange, verse.substr(0, 40)));
    }
    text->append(verse);
    text->push_back('\n');
  }
  free(line);
  return status;
}

}  // namespace

bool StripVerseReference(std::string_view line, std::string_view* text) {
  std::string_view s = line;
  if (!s.empty() && s[0] >= '1' && s[0] <= '3') s.remove_prefix(1);
  if (SkipWhile(&s, [](unsigned char c) { return std::isalpha(c); }) == 0 ||
      SkipWhile(&s, [](unsigned char c) { return std::isdigit(c); }) == 0 ||
      s.empty() || s[0] != ':') {
    return false;
  }
  s.remove_prefix(1);
  if (SkipWhile(&s, [](unsigned char c) { return std::isdigit(c); }) == 0 ||
      s.empty() || s[0] != ' ') {
    return false;
  }
  *text = s.substr(1);
  return true;
}

absl::StatusOr<std::string> ReadKjv(const std::string& program) {
  if (!Executable(program)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "`%s` is not installed, so the KJV corpus cannot be read: install the "
        "Debian package bible-kjv (scripts/setup.sh does), or pass a text "
        "file with --corpus=FILE",
        program));
  }
  const std::string command = absl::StrFormat("'%s' -f %s", program, kKjvRange);
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrFormat("cannot run `%s` (too many processes?)", command));
  }
  std::string text;
  text.reserve(size_t{4500} << 10);
  absl::Status status = AppendVerses(out, program, &text);
  const int wait_status = pclose(out);
  if (status.ok() && (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status))) {
    status = absl::InternalError(
        absl::StrFormat("`%s` failed (wait status %d); reinstall bible-kjv",
                        command, wait_status));
  }
  if (!status.ok()) return status;
  return text;
}

int64_t TrainLineCount(int64_t lines) {
  const int64_t validation = std::max<int64_t>(1, lines / 10);
  return lines - validation;
}

absl::StatusOr<CorpusScan> ScanCorpus(std::istream& in,
                                      const std::string& name) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(
      XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  CorpusScan scan;
  for (std::string line; std::getline(in, line); ++scan.lines) {
    line.push_back('\n');
    XXH3_64bits_update(state.get(), line.data(), line.size());
  }
  if (in.bad()) {
    return absl::DataLossError(absl::StrFormat(
        "reading the corpus %s failed after %d lines; check the file", name,
        scan.lines));
  }
  if (scan.lines < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the corpus %s has %d line(s); it needs at least 2 (training and "
        "validation), and far more to learn anything",
        name, scan.lines));
  }
  scan.hash = XXH3_64bits_digest(state.get());
  return scan;
}

absl::Status WriteCorpusSplit(std::istream& in, int64_t train_lines,
                              const std::string& train_path,
                              const std::string& validation_path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> train,
                          AtomicFileWriter::Create(train_path));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> validation,
                          AtomicFileWriter::Create(validation_path));
  int64_t number = 0;
  for (std::string line; std::getline(in, line); ++number) {
    line.push_back('\n');
    AtomicFileWriter& split = number < train_lines ? *train : *validation;
    STRATA_RETURN_IF_ERROR(split.Append(line));
  }
  if (in.bad()) {
    return absl::DataLossError(absl::StrFormat(
        "reading the corpus for %s failed after %d lines; check the file",
        train_path, number));
  }
  STRATA_RETURN_IF_ERROR(train->Commit());
  return validation->Commit();
}

}  // namespace strata::train
