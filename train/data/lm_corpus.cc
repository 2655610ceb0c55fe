// lm_corpus.cc: PrepareLmCorpus — each step checks the cache first and
// builds only what is missing (see the layout in lm_corpus.h).
#include "train/data/lm_corpus.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "strata/status.h"
#include "train/data/bpe_tokenizer.h"
#include "train/data/corpus.h"
#include "train/io/atomic_file.h"

namespace strata::train {
namespace {

namespace fs = std::filesystem;

// Where the corpus's lines come from; Open() starts a fresh pass.
struct Source {
  std::string name;  // "kjv" or the file's stem, safe as a directory name
  std::string text;  // the KJV, when path is empty
  std::string path;  // a corpus file
  std::unique_ptr<std::istream> Open() const {
    if (path.empty()) return std::make_unique<std::istringstream>(text);
    return std::make_unique<std::ifstream>(path, std::ios::binary);
  }
};

// `stem` with every character but [A-Za-z0-9._-] replaced by '_', cut to 64
// characters.
std::string SafeName(std::string stem) {
  for (char& c : stem) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '.' && c != '_' && c != '-') c = '_';
  }
  // A directory name has 255 bytes; the hash and dash take 17 of them.
  if (stem.size() > 64) stem.resize(64);
  return stem.empty() ? "corpus" : stem;
}

absl::StatusOr<Source> LoadSource(const std::string& corpus_path) {
  Source source;
  if (corpus_path.empty()) {
    source.name = "kjv";
    STRATA_ASSIGN_OR_RETURN(source.text, ReadKjv());
    return source;
  }
  STRATA_RETURN_IF_ERROR(CheckLmCorpusFile(corpus_path));
  source.name = SafeName(fs::path(corpus_path).stem().string());
  source.path = corpus_path;
  return source;
}

// The parsed tokenizer spelling: bpe_vocab 0 means "byte".
absl::StatusOr<int> ParseTokenizer(const std::string& spelling) {
  if (spelling == "byte") return 0;
  absl::string_view rest = spelling;  // Debian's Abseil has its own type
  int vocab = 0;
  if (absl::ConsumePrefix(&rest, "bpe:") && absl::SimpleAtoi(rest, &vocab) &&
      vocab >= kMinBpeVocab && vocab <= kMaxBpeVocab) {
    return vocab;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown tokenizer \"%s\"; use \"byte\" or \"bpe:N\" with N in "
      "[%d, %d] (e.g. bpe:4096)",
      spelling, kMinBpeVocab, kMaxBpeVocab));
}

// The shard directory's name for a tokenizer: "byte" or "bpe-v<N>-seed<S>".
std::string TokenizerDirName(int bpe_vocab, uint64_t seed) {
  if (bpe_vocab == 0) return "byte";
  return std::string(
      absl::StripSuffix(BpeModelFileName(bpe_vocab, seed), ".model"));
}

// Tokenizes `text_path` line by line (each line with its '\n') into a new
// shard at `shard_path`.
absl::Status WriteShard(const Tokenizer& tokenizer,
                        const std::string& text_path,
                        const std::string& shard_path) {
  std::ifstream in(text_path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrFormat(
        "cannot open %s to tokenize it; delete its directory to rebuild",
        text_path));
  }
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<TokenShardWriter> writer,
      TokenShardWriter::Create(shard_path, tokenizer.vocab_size(),
                               tokenizer.id()));
  for (std::string line; std::getline(in, line);) {
    line.push_back('\n');
    STRATA_RETURN_IF_ERROR(writer->Append(tokenizer.Encode(line)));
  }
  if (in.bad()) {
    return absl::DataLossError(
        absl::StrFormat("reading %s failed; delete it to rebuild", text_path));
  }
  return writer->Finish();
}

// The shard at `path`, built from `text_path` first if missing.
absl::StatusOr<std::unique_ptr<TokenShardReader>> LoadOrWriteShard(
    const Tokenizer& tokenizer, const std::string& text_path,
    const std::string& path) {
  if (!fs::exists(path)) {
    STRATA_RETURN_IF_ERROR(WriteShard(tokenizer, text_path, path));
  }
  return TokenShardReader::Open(path, tokenizer.vocab_size(), tokenizer.id());
}

// Writes train.txt and validation.txt under `corpus_dir` unless both exist.
absl::Status EnsureSplit(const Source& source, int64_t lines,
                         const std::string& corpus_dir) {
  const std::string train = corpus_dir + "/train.txt";
  const std::string validation = corpus_dir + "/validation.txt";
  if (fs::exists(train) && fs::exists(validation)) return absl::OkStatus();
  return WriteCorpusSplit(*source.Open(), TrainLineCount(lines), train,
                          validation);
}

}  // namespace

absl::StatusOr<std::string> DefaultCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/strata";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') {
    return std::string(home) + "/.cache/strata";
  }
  return absl::FailedPreconditionError(
      "neither XDG_CACHE_HOME nor HOME is set, so there is no default cache "
      "directory for the tokenized corpus; set one or pass a cache directory");
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(
    const std::string& tokenizer, uint64_t seed,
    const std::string& corpus_dir) {
  STRATA_ASSIGN_OR_RETURN(const int bpe_vocab, ParseTokenizer(tokenizer));
  if (bpe_vocab == 0) return MakeByteTokenizer();
  return LoadOrTrainBpe(corpus_dir + "/train.txt", corpus_dir, bpe_vocab, seed);
}

absl::Status CheckLmCorpusFile(const std::string& path) {
  if (path.empty() || fs::is_regular_file(path)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrFormat(
      "corpus file %s does not exist or is not a regular file; check "
      "--corpus",
      path));
}

absl::StatusOr<LmCorpus> PrepareLmCorpus(const LmCorpusOptions& options) {
  STRATA_ASSIGN_OR_RETURN(const int bpe_vocab,
                          ParseTokenizer(options.tokenizer));
  std::string root = options.cache_dir;
  if (root.empty()) {
    STRATA_ASSIGN_OR_RETURN(root, DefaultCacheDir());
  }
  STRATA_ASSIGN_OR_RETURN(const Source source, LoadSource(options.corpus_path));
  STRATA_ASSIGN_OR_RETURN(const CorpusScan scan,
                          ScanCorpus(*source.Open(), source.name));
  const std::string corpus_dir =
      absl::StrFormat("%s/lm/%s-%016x", root, source.name, scan.hash);
  STRATA_RETURN_IF_ERROR(MakeDirectories(corpus_dir));
  STRATA_RETURN_IF_ERROR(EnsureSplit(source, scan.lines, corpus_dir));

  LmCorpus corpus;
  STRATA_ASSIGN_OR_RETURN(
      corpus.tokenizer,
      MakeTokenizer(options.tokenizer, options.tokenizer_seed, corpus_dir));
  corpus.dir =
      corpus_dir + "/" + TokenizerDirName(bpe_vocab, options.tokenizer_seed);
  STRATA_RETURN_IF_ERROR(MakeDirectories(corpus.dir));
  corpus.train_shard_path = corpus.dir + "/train.tok";
  corpus.validation_shard_path = corpus.dir + "/validation.tok";
  STRATA_ASSIGN_OR_RETURN(
      corpus.train,
      LoadOrWriteShard(*corpus.tokenizer, corpus_dir + "/train.txt",
                       corpus.train_shard_path));
  STRATA_ASSIGN_OR_RETURN(
      corpus.validation,
      LoadOrWriteShard(*corpus.tokenizer, corpus_dir + "/validation.txt",
                       corpus.validation_shard_path));
  return corpus;
}

}  // namespace strata::train
