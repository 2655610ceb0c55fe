// make_seeds.cc: writes the fuzz targets' seed corpora
// (tests/fuzz/corpus/<target>/) from files strata itself writes: tiny MLP
// checkpoints (manifest.json, tensors.bin) and their safetensors exports,
// token shards, BPE models, machine profiles, run reports and configs,
// corpora, IDX pairs and command lines. Run it again after a format
// changes (from the project's root):
//   build/default/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
//       build/default/apps/strata
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "strata/profile.h"
#include "strata/store.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/util/test_util.h"
#include "train/compute/compute.h"
#include "train/data/bpe_tokenizer.h"
#include "train/data/token_shard.h"
#include "train/io/checkpoint_writer.h"
#include "train/model/model.h"
#include "train/run/safetensors.h"
#include "train/run/train_checkpoint.h"

namespace strata::fuzz {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "make_seeds: %s\n", what.c_str());
  std::exit(1);
}

void Check(const absl::Status& s) {
  if (!s.ok()) Die(s.ToString());
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), {}};
}

// Writes `bytes` as corpus/<target>/<name>.
void Seed(const fs::path& corpus, const std::string& target,
          const std::string& name, std::string_view bytes) {
  fs::create_directories(corpus / target);
  WriteFile((corpus / target / name).string(), bytes);
}

// A tiny MLP of `job` saved at `step` into `save`: its step directory.
std::string SaveMlp(const train::TrainOptions& job, int64_t step,
                    const testing::TempDir& save) {
  testing::TempDir nvme;
  auto store = Store::Open(
      testing::SmallStoreOptions(nvme.path(), 1 << 20, 1 << 20, 8 << 20));
  Check(store.status());
  auto compute = train::MakeCpuCompute(1);
  auto model = train::Mlp::Create(store->get(), compute.get(), job.model);
  Check(model.status());
  auto saved = train::SaveCheckpoint(
      **store, train::MlpCheckpoint(**model, job, {.step = step}),
      {.dir = save.path(), .keep = 1});
  Check(saved.status());
  return saved->path;
}

// A checkpoint as the multi-file targets take it: manifest, then tensors.
std::string CheckpointInput(const std::string& step_dir) {
  return ReadAll(step_dir + "/manifest.json") + std::string(kPartSeparator) +
         ReadAll(step_dir + "/tensors.bin");
}

train::TrainOptions TinyMlp(int64_t inputs, int64_t width, int depth,
                            int64_t classes) {
  train::TrainOptions job;
  job.model.inputs = inputs;
  job.model.width = width;
  job.model.depth = depth;
  job.model.classes = classes;
  job.model.batch = 2;
  return job;
}

// Three tiny MLPs saved (manifest, tensors.bin) and exported.
void Checkpoints(const fs::path& corpus) {
  const struct {
    int64_t inputs, width, classes;
    int depth;
    int64_t step;
  } kJobs[] = {{4, 3, 2, 1, 1}, {6, 5, 3, 2, 7}, {2, 2, 2, 1, 12}};
  int i = 0;
  for (const auto& j : kJobs) {
    testing::TempDir save;
    const std::string dir =
        SaveMlp(TinyMlp(j.inputs, j.width, j.depth, j.classes), j.step, save);
    const std::string name = absl::StrFormat("mlp-%d", i++);
    Seed(corpus, "checkpoint_manifest", name + ".json",
         ReadAll(dir + "/manifest.json"));
    Seed(corpus, "checkpoint_reader", name, CheckpointInput(dir));
    const std::string out = save.path() + "/m.safetensors";
    Check(train::ExportSafetensors(dir, out).status());
    Seed(corpus, "safetensors", name + ".safetensors", ReadAll(out));
  }
}

// Three saves of checkpoint_resume_fuzzer.cc's tiny MLP (4 inputs, width 3,
// depth 1, 2 classes): other steps, learning rates and accumulation (which
// a resume warns of, never refuses).
void ResumableCheckpoints(const fs::path& corpus) {
  const struct {
    int64_t step;
    float lr;
    int accumulate;
  } kSaves[] = {{1, 1e-3f, 1}, {9, 3e-4f, 2}, {500, 1e-2f, 4}};
  int i = 0;
  for (const auto& c : kSaves) {
    testing::TempDir save;
    train::TrainOptions job = TinyMlp(4, 3, 1, 2);
    job.model.adam.lr = c.lr;
    job.model.accumulate = c.accumulate;
    Seed(corpus, "checkpoint_resume", absl::StrFormat("mlp-%d", i++),
         CheckpointInput(SaveMlp(job, c.step, save)));
  }
}

void TokenShards(const fs::path& corpus) {
  const struct {
    int64_t vocab;
    std::vector<int32_t> ids;
  } kShards[] = {{256, {72, 101, 108, 108, 111, 10}},
                 {70000, {0, 65535, 65536, 69999}},
                 {300, {}}};
  int i = 0;
  for (const auto& s : kShards) {
    testing::TempDir dir;
    const std::string path = dir.path() + "/train.tok";
    auto writer = train::TokenShardWriter::Create(path, s.vocab, 0x5eed + i);
    Check(writer.status());
    Check((*writer)->Append(s.ids));
    Check((*writer)->Finish());
    Seed(corpus, "token_shard", absl::StrFormat("shard-%d.tok", i++),
         ReadAll(path));
  }
}

// BPE models of 300 pieces (bpe_model_fuzzer.cc's kVocab) on three texts.
void BpeModels(const fs::path& corpus) {
  for (int i = 0; i < 3; ++i) {
    testing::TempDir dir;
    const std::string text = dir.path() + "/train.txt";
    testing::WriteTestFile(text, testing::SyntheticText(200, 11 + i));
    Check(train::LoadOrTrainBpe(text, dir.path(), 300, 0).status());
    Seed(corpus, "bpe_model", absl::StrFormat("bpe-%d.model", i),
         ReadAll(dir.path() + "/" + train::BpeModelFileName(300, 0)));
  }
}

void Profiles(const fs::path& corpus) {
  MachineProfile measured{.device = "simulated",
                          .h2d = {{4096, 3.5}, {1 << 20, 11.25}},
                          .d2h = {{4096, 3.25}, {1 << 20, 10.5}},
                          .nvme_block_size_bytes = 1 << 20,
                          .nvme_queue_depth = 32,
                          .nvme_read_gbps = 2.75,
                          .nvme_write_gbps = 1.5,
                          .nvme_directory = "/mnt/nvme0"};
  MachineProfile links_only = measured;
  links_only.nvme_block_size_bytes = 0;
  links_only.nvme_queue_depth = 0;
  links_only.nvme_read_gbps = links_only.nvme_write_gbps = 0;
  links_only.nvme_directory.clear();
  MachineProfile gpu = measured;
  gpu.device = "cuda:NVIDIA H100 80GB HBM3";
  gpu.h2d = {{1 << 26, 53.1}};
  gpu.d2h = {{1 << 26, 54.9}};
  int i = 0;
  for (const MachineProfile& p : {measured, links_only, gpu}) {
    testing::TempDir dir;
    Check(SaveMachineProfile(p, dir.path() + "/p.json"));
    Seed(corpus, "machine_profile", absl::StrFormat("profile-%d.json", i++),
         ReadAll(dir.path() + "/p.json"));
  }
}

// Reports of real runs of the strata binary at `cli`, and a config by hand.
void Configs(const fs::path& corpus, const std::string& cli) {
  testing::TempDir dir;
  const struct {
    const char* name;
    const char* args;
  } kRuns[] = {
      {"mlp-report.json",
       "train --model=mlp --width=8 --depth=1 --batch=4 "
       "--max-steps=2"},
      {"bench-report.json", "bench --quick -t link"},
  };
  for (const auto& r : kRuns) {
    const std::string json = dir.path() + "/" + r.name;
    const std::string command =
        absl::StrFormat("cd %s && %s %s --json=%s >/dev/null 2>&1", dir.path(),
                        cli, r.args, json);
    if (std::system(command.c_str()) != 0) Die("failed: " + command);
    Seed(corpus, "config_file", r.name, ReadAll(json));
  }
  Seed(corpus, "config_file", "flags.json",
       R"({"model": "gpt", "max-steps": 60, "device_budget": "7.5MiB",)"
       R"( "precision": "bf16", "checkpoint": "block", "distributed": false})");
}

void CommandLines(const fs::path& corpus) {
  const std::vector<std::vector<std::string>> kLines = {
      {"train", "--model=gpt", "--max-steps=60", "--json=run.json"},
      {"train", "--model", "mlp", "--device-budget=16MiB", "--noresident"},
      {"bench", "--quick", "-t", "link"},
      {"export", "save", "--safetensors=model.safetensors"},
      {"help", "train"},
      {"scale", "--ranks=8", "--json=scale.json"},
      {"--version"},
      {"train", "--model=mlp", "--precision=bf16", "--accumulate=4",
       "--checkpoint=block", "--save-dir", "save"},
  };
  int i = 0;
  for (const auto& words : kLines) {
    std::string bytes;
    for (const std::string& w : words) {
      bytes += (bytes.empty() ? "" : std::string(1, '\0')) + w;
    }
    Seed(corpus, "command_line", absl::StrFormat("line-%d", i++), bytes);
  }
}

void Corpora(const fs::path& corpus) {
  Seed(corpus, "lm_corpus", "synthetic.txt", testing::SyntheticText(30, 3));
  Seed(corpus, "lm_corpus", "verses.txt",
       "In the beginning God created the heaven and the earth.\n"
       "And the earth was without form, and void.\n"
       "And God said, Let there be light: and there was light.\n");
  Seed(corpus, "lm_corpus", "crlf-no-final-newline.txt",
       "caf\xc3\xa9\r\nna\xc3\xafve\r\n\r\nlast line");
}

// An IDX image file of `count` rows x cols images and its label file.
std::pair<std::string, std::string> Idx(uint32_t count, uint32_t rows,
                                        uint32_t cols) {
  const auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
  };
  std::string images = be32(0x803) + be32(count) + be32(rows) + be32(cols);
  for (uint32_t i = 0; i < count * rows * cols; ++i) {
    images.push_back(static_cast<char>(i * 37));
  }
  std::string labels = be32(0x801) + be32(count);
  for (uint32_t i = 0; i < count; ++i)
    labels.push_back(static_cast<char>(i % 10));
  return {images, labels};
}

std::string Gzip(const std::string& bytes) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/f.gz";
  gzFile f = gzopen(path.c_str(), "wb9");
  if (f == nullptr ||
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) !=
          static_cast<int>(bytes.size()) ||
      gzclose(f) != Z_OK) {
    Die("gzip failed");
  }
  return ReadAll(path);
}

void IdxPairs(const fs::path& corpus) {
  const std::string sep(kPartSeparator);
  const auto [a_images, a_labels] = Idx(3, 2, 2);
  Seed(corpus, "idx_dataset", "plain", a_images + sep + a_labels);
  const auto [b_images, b_labels] = Idx(2, 28, 28);
  Seed(corpus, "idx_dataset", "gzip", Gzip(b_images) + sep + Gzip(b_labels));
  Seed(corpus, "idx_dataset", "mixed", Gzip(a_images) + sep + a_labels);
}

}  // namespace
}  // namespace strata::fuzz

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR STRATA_BINARY\n");
    return 2;
  }
  using namespace strata::fuzz;
  const fs::path corpus = argv[1];
  Checkpoints(corpus);
  ResumableCheckpoints(corpus);
  TokenShards(corpus);
  BpeModels(corpus);
  Profiles(corpus);
  Configs(corpus, fs::absolute(argv[2]).string());
  CommandLines(corpus);
  Corpora(corpus);
  IdxPairs(corpus);
  return 0;
}
