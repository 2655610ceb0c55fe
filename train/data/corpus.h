// corpus.h: the text a language model learns from, as lines — the King James
// Bible from Debian's bible-kjv (one verse a line) or any plain text file (one
// line a line) — and its split: the last tenth of the lines is validation,
// the rest training, so validation text is never seen in training.
//
// Everything streams line by line except ReadKjv, whose 4.4 MB it returns
// whole. Functions here are thread-compatible (no shared state).
#ifndef STRATA_TRAIN_DATA_CORPUS_H_
#define STRATA_TRAIN_DATA_CORPUS_H_

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace strata::train {

inline constexpr int64_t kKjvVerses = 31102;

// The KJV's 31,102 verses in canonical order, each on its own line ending
// in '\n', without the reference prefix ("Ge1:1 ", "1Sa3:4 ") that
// `bible -f gen1:1-rev22:21` prints. `program` is the bible(1) binary,
// searched in PATH. Errors:
//   FailedPrecondition  `program` is not installed: "install the Debian
//                       package bible-kjv (scripts/setup.sh does)".
//   Internal            it failed, or printed a line without a reference.
absl::StatusOr<std::string> ReadKjv(const std::string& program = "bible");

// Sets `*text` to `line` without its leading verse reference (an optional
// digit 1-3, letters, chapter:verse, one space: "1Sa3:4 ") and returns true;
// returns false, leaving `*text` alone, if the line has none.
bool StripVerseReference(std::string_view line, std::string_view* text);

// Lines that go to training out of `lines`: all but the last lines/10, with
// at least one line in each split (lines >= 2).
int64_t TrainLineCount(int64_t lines);

// What one pass over a corpus found.
struct CorpusScan {
  int64_t lines = 0;  // a last line without '\n' counts
  uint64_t hash = 0;  // XXH3-64 of the lines, each with its '\n'
};

// Counts and hashes the lines of `in` (read to its end). InvalidArgument
// naming `name` if there are fewer than two lines.
absl::StatusOr<CorpusScan> ScanCorpus(std::istream& in,
                                      const std::string& name);

// Writes the first `train_lines` lines of `in` to `train_path` and the rest
// to `validation_path`, each line ending in '\n', each file atomically.
// Errors name the file.
absl::Status WriteCorpusSplit(std::istream& in, int64_t train_lines,
                              const std::string& train_path,
                              const std::string& validation_path);

}  // namespace strata::train

#endif  // STRATA_TRAIN_DATA_CORPUS_H_
