// checkpoint_test.cc: checkpoint files — the manifest lists every tensor,
// kill -9 in the middle of a save leaves the previous checkpoint whole, a
// truncated or corrupted checkpoint is refused naming the file and tensor,
// another shape is refused saying what differs, --keep prunes, and the
// safetensors export follows the format's rules and holds the weights.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/xxh3.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "train/compute/compute.h"
#include "train/io/atomic_file.h"
#include "train/io/checkpoint_reader.h"
#include "train/io/checkpoint_writer.h"
#include "train/io/safetensors_header.h"
#include "train/model/model.h"
#include "train/run/safetensors.h"
#include "train/run/train_checkpoint.h"
#include "train/run/trainer.h"

namespace strata::train {
namespace {

using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

TrainOptions Job(int64_t width = 48) {
  TrainOptions o;
  o.model.inputs = 32;
  o.model.classes = 4;
  o.model.width = width;
  o.model.depth = 2;
  o.model.batch = 8;
  o.model.seed = 5;
  return o;
}

// An MLP homed on NVMe with a host budget of a few of its tensors.
struct Fixture {
  explicit Fixture(TrainOptions o = Job()) : job(std::move(o)) {
    auto s = Store::Open(
        SmallStoreOptions(nvme.path(), 256 * 1024, 96 * 1024, 8 * kMiB));
    EXPECT_TRUE(s.ok()) << s.status();
    store = std::move(*s);
    compute = MakeCpuCompute(1);
    auto m = Mlp::Create(store.get(), compute.get(), job.model);
    EXPECT_TRUE(m.ok()) << m.status();
    model = std::move(*m);
  }
  absl::StatusOr<SavedCheckpoint> Save(const std::string& dir, int64_t step,
                                       int keep = 2) {
    return SaveCheckpoint(*store, MlpCheckpoint(*model, job, {.step = step}),
                          {.dir = dir, .keep = keep});
  }
  TempDir nvme;
  TrainOptions job;
  std::unique_ptr<Store> store;
  std::unique_ptr<Compute> compute;
  std::unique_ptr<Mlp> model;
};

TEST(CheckpointTest, ManifestListsEveryStateTensor) {
  TempDir dir;
  Fixture fx;
  auto saved = fx.Save(dir.path(), 7);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->path, dir.path() + "/step-00000007");
  auto reader = CheckpointReader::Open(saved->path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const CheckpointManifest& m = (*reader)->manifest();
  EXPECT_EQ(m.model, "mlp");
  EXPECT_EQ(m.step, 7);
  EXPECT_EQ(m.config.at("width"), "48");
  ASSERT_EQ(m.tensors.size(), 3u * 6);  // 3 Linears x (w, b, 4 moments)
  EXPECT_EQ(m.tensors[0].name, "layer0.weight");
  EXPECT_EQ(m.tensors[0].shape, (std::vector<int64_t>{48, 32}));
  EXPECT_EQ(m.tensors[0].kind, TensorKind::kParameter);
  EXPECT_EQ(m.tensors[2].name, "layer0.weight.adam_m");
  EXPECT_EQ(m.tensors[2].kind, TensorKind::kOptimizerState);
  uint64_t end = 0;
  for (const CheckpointTensorEntry& e : m.tensors) {
    EXPECT_EQ(e.offset, end) << e.name;
    end += e.bytes;
    std::vector<char> bytes(e.bytes);
    EXPECT_TRUE((*reader)->ReadTensor(e, bytes.data()).ok()) << e.name;
  }
  EXPECT_EQ(end, m.data_bytes);
  EXPECT_EQ(fs::file_size(saved->path + "/tensors.bin"), end);
  std::vector<float> w;
  ASSERT_TRUE(fx.model->ReadWeights(0, &w).ok());
  std::vector<float> saved_w(48 * 32);
  ASSERT_TRUE((*reader)->ReadTensor(m.tensors[0], saved_w.data()).ok());
  EXPECT_EQ(saved_w, w);
}

// The child saves one checkpoint, changes a weight, and starts a second save
// that a gate stops after 3 tensors; the parent kills it there with SIGKILL.
TEST(CheckpointTest, KillDuringSaveLeavesThePreviousCheckpoint) {
  TempDir dir;
  int at_gate[2], never[2];
  ASSERT_EQ(pipe(at_gate), 0);
  ASSERT_EQ(pipe(never), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(at_gate[0]);
    close(never[1]);
    Fixture fx;
    if (!fx.Save(dir.path(), 1).ok()) _exit(3);
    std::vector<float> w(48 * 32, 0.5f);
    const TensorId w0 = fx.model->StateTensors()[0];
    if (!fx.store->Write(w0, w.data(), w.size() * 4).ok()) _exit(4);
    CheckpointSaveOptions gated{.dir = dir.path(), .keep = 2};
    gated.after_tensor = [&](int written) {
      if (written != 3) return;
      char c = 'g';
      if (write(at_gate[1], &c, 1) != 1) _exit(5);
      (void)!read(never[0], &c, 1);  // blocks until killed
    };
    (void)SaveCheckpoint(*fx.store,
                         MlpCheckpoint(*fx.model, fx.job, {.step = 2}), gated);
    _exit(6);  // not reached
  }
  close(at_gate[1]);
  close(never[0]);
  char c = 0;
  ASSERT_EQ(read(at_gate[0], &c, 1), 1) << "the child exited before the gate";
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  close(at_gate[0]);
  close(never[1]);
  EXPECT_TRUE(fs::exists(dir.path() + "/step-00000002.tmp"));
  auto newest = ResolveCheckpoint(dir.path());
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(*newest, dir.path() + "/step-00000001");
  // The previous checkpoint is whole and restores into a fresh model.
  Fixture fresh;
  TrainOptions job = fresh.job;
  auto resumed = ResumeMlp(dir.path(), *fresh.store, *fresh.model, job);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->step, 1);
  Fixture original;  // the same seed: the weights before the change
  std::vector<float> a, b;
  ASSERT_TRUE(fresh.model->ReadWeights(0, &a).ok());
  ASSERT_TRUE(original.model->ReadWeights(0, &b).ok());
  EXPECT_EQ(a, b);
  // The next save clears the leftover temporary.
  ASSERT_TRUE(fresh.Save(dir.path(), 3).ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/step-00000002.tmp"));
}

class DamagedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto saved = fx_.Save(dir_.path(), 4);
    ASSERT_TRUE(saved.ok()) << saved.status();
    path_ = saved->path;
  }
  absl::Status Resume() {
    Fixture fresh;
    TrainOptions job = fresh.job;
    return ResumeMlp(dir_.path(), *fresh.store, *fresh.model, job).status();
  }
  TempDir dir_;
  Fixture fx_;
  std::string path_;
};

TEST_F(DamagedCheckpointTest, FlippedBitIsDataLossNamingTheTensor) {
  auto reader = CheckpointReader::Open(path_);
  ASSERT_TRUE(reader.ok());
  const CheckpointTensorEntry e = (*reader)->manifest().tensors[6];
  reader->reset();
  {
    std::fstream f(path_ + "/tensors.bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(e.offset + 5));
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(static_cast<std::streamoff>(e.offset + 5));
    f.write(&c, 1);
  }
  const absl::Status st = Resume();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr("'" + e.name + "'"));
  EXPECT_THAT(st.message(), HasSubstr(path_ + "/tensors.bin"));
}

TEST_F(DamagedCheckpointTest, TruncatedDataIsDataLossNamingTheTensor) {
  fs::resize_file(path_ + "/tensors.bin",
                  fs::file_size(path_ + "/tensors.bin") - 100);
  const absl::Status st = Resume();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr("truncated"));
  EXPECT_THAT(st.message(), HasSubstr("'layer2.weight.adam_v'"));
  EXPECT_THAT(st.message(), HasSubstr("tensors.bin"));
}

TEST_F(DamagedCheckpointTest, TruncatedManifestIsDataLossNamingTheFile) {
  fs::resize_file(path_ + "/manifest.json", 200);
  const absl::Status st = Resume();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr(path_ + "/manifest.json"));
}

// The step and the trainer's state are covered by the manifest's own
// checksum: an edit that leaves valid JSON (a step moved on) is refused.
TEST_F(DamagedCheckpointTest, EditedStepIsDataLoss) {
  const std::string path = path_ + "/manifest.json";
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = text.find("\"step\": ");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 8, "1");  // "step": 1N
  std::ofstream(path, std::ios::trunc) << text;
  const absl::Status st = Resume();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr(path));
  EXPECT_THAT(st.message(), HasSubstr("checksum"));
}

// Found by the checkpoint_reader fuzz target: a float where a whole number
// belongs (6.6e89 bytes) was cast by nlohmann's get<uint64_t>(), undefined
// behaviour; each such field is now DataLoss naming it.
TEST_F(DamagedCheckpointTest, AFloatOrNegativeWholeNumberIsDataLoss) {
  auto text = ReadWholeFile(path_ + "/manifest.json");
  ASSERT_TRUE(text.ok());
  const nlohmann::json good = nlohmann::json::parse(*text);
  const struct {
    nlohmann::json::json_pointer where;
    nlohmann::json value;
    const char* says;
  } kCases[] = {
      {"/data_bytes"_json_pointer, 6.6e89, "\"data_bytes\" is 6.6e+89"},
      {"/step"_json_pointer, 2.5, "\"step\" is 2.5"},
      {"/tensors/0/bytes"_json_pointer, -8, "\"bytes\" is -8"},
      {"/tensors/0/shape/0"_json_pointer, 1e30, "a dimension 1e+30"},
      {"/version"_json_pointer, 1e300, "no whole-number \"version\""},
  };
  for (const auto& c : kCases) {
    nlohmann::json bad = good;
    bad[c.where] = c.value;
    auto m = DecodeManifest(ResealManifest(bad.dump()), "m.json");
    EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << c.says;
    EXPECT_THAT(m.status().message(), HasSubstr(c.says));
  }
}

// Found by the checkpoint_reader and checkpoint_resume fuzz targets.
TEST_F(DamagedCheckpointTest, ATensorListedTwiceOrAFormatNotAStringIsDataLoss) {
  auto text = ReadWholeFile(path_ + "/manifest.json");
  ASSERT_TRUE(text.ok());
  nlohmann::json twice = nlohmann::json::parse(*text);
  twice["tensors"][1]["name"] = twice["tensors"][0]["name"];
  auto m = DecodeManifest(ResealManifest(twice.dump()), "m.json");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(m.status().message(), HasSubstr("listed twice"));
  nlohmann::json format = nlohmann::json::parse(*text);
  format["format"] = nlohmann::json::object();
  m = DecodeManifest(ResealManifest(format.dump()), "m.json");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(m.status().message(), HasSubstr("no \"format\""));
}

TEST_F(DamagedCheckpointTest, AnotherShapeIsRefusedSayingWhatDiffers) {
  Fixture other(Job(/*width=*/40));
  TrainOptions job = other.job;
  const absl::Status st =
      ResumeMlp(dir_.path(), *other.store, *other.model, job).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("--width: checkpoint 48, this run 40"));
  EXPECT_EQ(job.start_step, 0);
}

TEST_F(DamagedCheckpointTest, OtherSettingsAreWarnings) {
  Fixture other;
  TrainOptions job = other.job;
  job.model.adam.lr = 2e-3f;
  auto resumed = ResumeMlp(dir_.path(), *other.store, *other.model, job);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->warnings.size(), 1u);
  EXPECT_THAT(resumed->warnings[0], HasSubstr("--lr: checkpoint"));
  EXPECT_EQ(job.start_step, 4);
}

TEST_F(DamagedCheckpointTest, ResumingAtTheLastStepIsRefused) {
  Fixture fresh;
  TrainOptions job = fresh.job;
  job.max_steps = 4;  // the checkpoint's step: nothing is left
  ASSERT_TRUE(ResumeMlp(dir_.path(), *fresh.store, *fresh.model, job).ok());
  Dataset data{.count = 16, .rows = 4, .cols = 8, .classes = 4};
  data.images.assign(16 * 32, 0.25f);
  data.labels.assign(16, 1);
  const absl::Status st = Train(*fresh.model, data, data, job).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("nothing is left to train"));
}

TEST(CheckpointTest, KeepLeavesTheNewest) {
  TempDir dir;
  Fixture fx;
  for (int64_t step : {10, 20, 30, 40}) {
    ASSERT_TRUE(fx.Save(dir.path(), step, /*keep=*/2).ok());
  }
  std::vector<CheckpointRef> all = ListCheckpoints(dir.path());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].step, 40);
  EXPECT_EQ(all[1].step, 30);
  EXPECT_EQ(fx.Save(dir.path(), 50, /*keep=*/0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckpointTest, TooLittleFreeSpaceIsRefusedWithTheSizeNeeded) {
  TempDir dir;
  Fixture fx;
  ASSERT_TRUE(fx.Save(dir.path(), 1).ok());
  CheckpointSaveOptions o{.dir = dir.path()};
  o.free_bytes = [](const std::string&) -> absl::StatusOr<uint64_t> {
    return 4096;
  };
  auto saved = SaveCheckpoint(*fx.store,
                              MlpCheckpoint(*fx.model, fx.job, {.step = 2}), o);
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(saved.status().message(), HasSubstr("only 4096 are free"));
  EXPECT_THAT(saved.status().message(), HasSubstr("step-00000002 needs"));
  EXPECT_FALSE(fs::exists(dir.path() + "/step-00000002.tmp"));
  EXPECT_EQ(ListCheckpoints(dir.path()).size(), 1u);  // the old one stays
}

TEST(CheckpointTest, SavingAStepAgainReplacesIt) {
  TempDir dir;
  Fixture fx;
  ASSERT_TRUE(fx.Save(dir.path(), 5).ok());
  std::vector<float> w(48 * 32, 0.25f);
  ASSERT_TRUE(
      fx.store->Write(fx.model->StateTensors()[0], w.data(), w.size() * 4)
          .ok());
  ASSERT_TRUE(fx.Save(dir.path(), 5).ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/step-00000005.old"));
  auto reader = CheckpointReader::Open(dir.path() + "/step-00000005");
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> got(w.size());
  ASSERT_TRUE(
      (*reader)->ReadTensor((*reader)->manifest().tensors[0], got.data()).ok());
  EXPECT_EQ(got, w);
}

TEST(CheckpointTest, NoCheckpointIsNotFound) {
  TempDir dir;
  EXPECT_EQ(ResolveCheckpoint(dir.path()).status().code(),
            absl::StatusCode::kNotFound);
  const absl::Status missing =
      ResolveCheckpoint(dir.path() + "/missing").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("no such directory"));
  // A file where a directory belongs is named as one.
  const std::string file = dir.path() + "/file";
  std::ofstream(file) << "x";
  const absl::Status not_dir = ResolveCheckpoint(file).status();
  EXPECT_EQ(not_dir.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(not_dir.message(), HasSubstr("is not a directory"));
  EXPECT_THAT(ResolveCheckpoint(dir.path()).status().message(),
              HasSubstr("no complete checkpoint"));
}

// Parses a .safetensors file by the format's rules; returns the header.
nlohmann::json ParseSafetensors(const std::string& bytes, std::string* data) {
  EXPECT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) {
    n |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  }
  EXPECT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start 8-byte aligned";
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  const size_t last = header.find_last_not_of(' ');
  EXPECT_EQ(header[last], '}') << "only spaces may pad the header";
  *data = bytes.substr(8 + n);
  return nlohmann::json::parse(header);
}

TEST(CheckpointTest, SafetensorsExportFollowsTheFormat) {
  TempDir dir;
  Fixture fx;
  auto saved = fx.Save(dir.path(), 12);
  ASSERT_TRUE(saved.ok());
  const std::string out = dir.path() + "/model.safetensors";
  auto done = ExportSafetensors(dir.path(), out);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->tensors, 6);  // weights and biases only
  auto bytes = ReadWholeFile(out);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(done->bytes, bytes->size());
  std::string data;
  const nlohmann::json h = ParseSafetensors(*bytes, &data);
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  EXPECT_EQ(h["__metadata__"]["strata.step"], "12");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, t] : h.items()) {
    if (name == "__metadata__") continue;
    EXPECT_EQ(t["dtype"], "F32") << name;
    uint64_t elements = 1;
    for (int64_t d : t["shape"]) elements *= d;
    const uint64_t begin = t["data_offsets"][0], end = t["data_offsets"][1];
    EXPECT_EQ(end - begin, elements * 4) << name;
    ranges.emplace_back(begin, end);
  }
  ASSERT_EQ(ranges.size(), 6u);
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [begin, end] : ranges) {
    EXPECT_EQ(begin, at) << "offsets are contiguous";
    at = end;
  }
  EXPECT_EQ(at, data.size()) << "the data ends where the last tensor does";
  for (int l = 0; l < 3; ++l) {
    std::vector<float> w;
    ASSERT_TRUE(fx.model->ReadWeights(l, &w).ok());
    const nlohmann::json& t = h[absl::StrFormat("layer%d.weight", l)];
    const uint64_t begin = t["data_offsets"][0];
    std::vector<float> got(w.size());
    std::memcpy(got.data(), data.data() + begin, got.size() * 4);
    EXPECT_EQ(got, w) << "layer " << l;
    EXPECT_EQ(t["shape"][1], l == 0 ? 32 : 48);
  }
  EXPECT_FALSE(h.contains("layer0.weight.adam_m"));
  // strata's own reader, by the same rules, reads it back in data order.
  auto read = ReadSafetensorsHeader(out);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->tensors.size(), 6u);
  EXPECT_EQ(read->data_bytes, data.size());
  for (const SafetensorsTensor& t : read->tensors) {
    EXPECT_EQ(t.begin, h[t.name]["data_offsets"][0].get<uint64_t>()) << t.name;
  }
  EXPECT_EQ(read->metadata.at("strata.step"), "12");
}

TEST(CheckpointTest, ExportRefusesAnOutputInsideTheCheckpoint) {
  TempDir dir;
  Fixture fx;
  auto saved = fx.Save(dir.path(), 12);
  ASSERT_TRUE(saved.ok());
  const std::string data = saved->path + "/tensors.bin";
  const auto size = fs::file_size(data);
  for (const std::string& out :
       {data, saved->path + "/manifest.json", saved->path + "/model.st"}) {
    const absl::Status st = ExportSafetensors(dir.path(), out).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << out;
    EXPECT_THAT(st.message(), HasSubstr("is inside checkpoint"));
  }
  EXPECT_EQ(fs::file_size(data), size);
  EXPECT_FALSE(fs::exists(saved->path + "/model.st"));
  Fixture fresh;  // the checkpoint still resumes
  TrainOptions job = fresh.job;
  EXPECT_TRUE(ResumeMlp(dir.path(), *fresh.store, *fresh.model, job).ok());
  // Beside the step directories is fine.
  EXPECT_TRUE(ExportSafetensors(dir.path(), dir.path() + "/m.st").ok());
}

// A manifest re-signed after its first tensor's shape was made 2^62 + 1 by
// 1 floats: 4 * (2^62 + 1) wraps to 4 bytes, which would pass a size check.
TEST(CheckpointTest, CraftedHugeShapeIsRefusedNamingTheTensor) {
  TempDir dir;
  Fixture fx;
  auto saved = fx.Save(dir.path(), 12);
  ASSERT_TRUE(saved.ok());
  const std::string path = saved->path + "/manifest.json";
  auto text = ReadWholeFile(path);
  ASSERT_TRUE(text.ok());
  nlohmann::json j = nlohmann::json::parse(*text);
  const std::string name = j["tensors"][0]["name"];
  j["tensors"][0]["shape"] = {(uint64_t{1} << 62) + 1, 1};
  j.erase("xxh3");
  const std::string body = j.dump();
  j["xxh3"] = absl::StrFormat("%016x", XXH3_64bits(body.data(), body.size()));
  std::ofstream(path, std::ios::trunc) << j.dump(1);
  auto done = ExportSafetensors(dir.path(), dir.path() + "/m.st");
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(done.status().message(), HasSubstr("'" + name + "'"));
  EXPECT_THAT(done.status().message(), HasSubstr("larger than any file"));
  EXPECT_FALSE(fs::exists(dir.path() + "/m.st"));
}

// kill -9 during an older strata's pruning left step directories without a
// manifest (often empty); the next save removes them, and nothing else.
TEST(CheckpointTest, LeftoverStepDirectoriesAreRemoved) {
  TempDir dir;
  fs::create_directories(dir.path() + "/step-00000001");
  fs::create_directories(dir.path() + "/step-00000002");
  std::ofstream(dir.path() + "/step-00000002/tensors.bin") << "half";
  fs::create_directories(dir.path() + "/notes");
  Fixture fx;
  ASSERT_TRUE(fx.Save(dir.path(), 3).ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/step-00000001"));
  EXPECT_FALSE(fs::exists(dir.path() + "/step-00000002"));
  EXPECT_TRUE(fs::exists(dir.path() + "/notes"));
  ASSERT_TRUE(fx.Save(dir.path(), 4, /*keep=*/1).ok());
  std::vector<CheckpointRef> all = ListCheckpoints(dir.path());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].step, 4);
  EXPECT_FALSE(fs::exists(dir.path() + "/step-00000003.old"));
}

}  // namespace
}  // namespace strata::train
