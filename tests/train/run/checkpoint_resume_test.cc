// checkpoint_resume_test.cc: resume is exact — a run saved at step k and
// resumed in a fresh store gives the losses and weights of the uninterrupted
// run from step k+1 on, bit for bit, for the MLP (mid-epoch, across an epoch
// boundary) and the GPT micro configuration (with clipping), both offloaded
// so the save streams from NVMe through small host budgets; saving changes
// neither the math nor the scheduler's learned trace.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "train/compute/compute.h"
#include "train/data/dataset.h"
#include "train/data/lm_batcher.h"
#include "train/data/token_shard.h"
#include "train/io/checkpoint_reader.h"
#include "train/io/checkpoint_writer.h"
#include "train/model/model.h"
#include "train/run/gpt_setup.h"
#include "train/run/lm_trainer.h"
#include "train/run/setup.h"
#include "train/run/train_checkpoint.h"
#include "train/run/trainer.h"

namespace strata::train {
namespace {

using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;

// Labels by the sign pattern of the first features: learnable, fixed.
Dataset Synthetic(int64_t count) {
  Dataset d;
  d.count = count;
  d.rows = 4;
  d.cols = 8;
  d.classes = 4;
  uint64_t s = 42;
  for (int64_t i = 0; i < count; ++i) {
    for (int f = 0; f < 32; ++f) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      d.images.push_back(static_cast<float>((s >> 40) * 0x1.0p-24) - 0.5f);
    }
    const float* x = d.images.data() + i * 32;
    d.labels.push_back((x[0] > 0 ? 1 : 0) + (x[1] > 0 ? 2 : 0));
  }
  return d;
}

TrainOptions MlpJob() {
  TrainOptions o;
  o.model.inputs = 32;
  o.model.classes = 4;
  o.model.width = 64;
  o.model.depth = 3;
  o.model.batch = 16;
  o.model.seed = 3;
  o.shuffle_seed = 3;
  o.epochs = 3;  // 4 steps an epoch: 12 steps
  o.evaluate = false;
  return o;
}

// Less than one checkpoint of MlpJob (125 KiB): a save streams through it.
constexpr uint64_t kMlpHostBudget = 96 * 1024;

struct MlpRun {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  int64_t skipped_steps = 0;
  uint64_t rerecords = 0;
  uint64_t nvme_read_bytes = 0;
};

// Trains MlpJob offloaded (NVMe home, tiny device and host budgets) or
// resident (device home, Adam on the device), resuming from `resume` when
// set and saving every `save_every` steps to `save_dir` when set.
MlpRun RunMlp(const std::string& save_dir, int64_t save_every,
              const std::string& resume, bool resident = false,
              const TrainOptions& base = MlpJob()) {
  TempDir nvme;
  StoreOptions so =
      SmallStoreOptions(nvme.path(), 80 * 1024, kMlpHostBudget, 8 * kMiB);
  TrainOptions job = base;
  if (resident) {
    EXPECT_TRUE(MakeResident(job, so).ok());
  }
  auto store = Store::Open(so);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return {};
  std::unique_ptr<Compute> compute = MakeCpuCompute(1);
  auto model = Mlp::Create(store->get(), compute.get(), job.model);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  if (!resume.empty()) {
    auto resumed = ResumeMlp(resume, **store, **model, job);
    EXPECT_TRUE(resumed.ok()) << resumed.status();
    if (!resumed.ok()) return {};
    EXPECT_TRUE(resumed->warnings.empty());
  }
  if (!save_dir.empty()) {
    job.after_step = [&](const StepDone& done) -> absl::Status {
      if (done.step % save_every != 0) return absl::OkStatus();
      return SaveCheckpoint(**store, MlpCheckpoint(**model, job, done),
                            {.dir = save_dir, .keep = 10})
          .status();
    };
  }
  const Dataset data = Synthetic(64);
  auto result = Train(**model, data, data, job);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  const Stats stats = (*store)->GetStats();
  MlpRun run{.losses = result->losses,
             .skipped_steps = (*model)->skipped_steps(),
             .rerecords = stats.scheduler.rerecords,
             .nvme_read_bytes = stats.links[int(Link::kNvmeRead)].bytes};
  for (int l = 0; l < (*model)->layers(); ++l) {
    run.weights.emplace_back();
    EXPECT_TRUE((*model)->ReadWeights(l, &run.weights.back()).ok());
  }
  return run;
}

std::vector<double> Tail(const std::vector<double>& v, size_t from) {
  return std::vector<double>(v.begin() + std::min(from, v.size()), v.end());
}

TEST(CheckpointResumeTest, MlpResumesBitwiseMidEpochAndAtEpochEnd) {
  TempDir saves;
  const MlpRun plain = RunMlp("", 0, "");
  const MlpRun saved = RunMlp(saves.path(), 3, "");
  ASSERT_EQ(plain.losses.size(), 12u);
  EXPECT_EQ(saved.losses, plain.losses);  // saving never changes the math
  EXPECT_EQ(saved.weights, plain.weights);
  // Nor the learned trace: a save that re-recorded the step's trace would
  // do so twice per save (4 saves); timing alone may cost one.
  EXPECT_LE(saved.rerecords, plain.rerecords + 1);
  EXPECT_GT(plain.nvme_read_bytes, 0u);  // offloaded: NVMe is used
  ASSERT_EQ(ListCheckpoints(saves.path()).size(), 4u);  // 3, 6, 9, 12
  auto reader = CheckpointReader::Open(saves.path() + "/step-00000003");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_GT((*reader)->manifest().data_bytes, kMlpHostBudget);
  for (int64_t k : {3, 6}) {  // 3: mid epoch 1; 6: mid epoch 2
    const std::string path = saves.path() + "/" + CheckpointDirName(k);
    const MlpRun resumed = RunMlp("", 0, path);
    EXPECT_EQ(resumed.losses, Tail(plain.losses, k)) << "resumed at " << k;
    EXPECT_EQ(resumed.weights, plain.weights) << "resumed at " << k;
  }
}

// fp16: the checkpoint carries the master weights, the 16-bit parameters
// and the loss scale's state. A loss scale too large for the first steps
// makes some of them skip, before and after the resume points.
TEST(CheckpointResumeTest, Fp16MlpResumesWithItsLossScale) {
  TrainOptions job = MlpJob();
  job.model.precision = Precision::kFp16;
  job.model.loss_scale.initial_scale = 16777216.0f;  // 2^24
  TempDir saves;
  const MlpRun plain = RunMlp("", 0, "", false, job);
  const MlpRun saved = RunMlp(saves.path(), 2, "", false, job);
  ASSERT_EQ(plain.losses.size(), 12u);
  EXPECT_EQ(saved.losses, plain.losses);
  EXPECT_GT(plain.skipped_steps, 0);
  for (int64_t k : {2, 6}) {
    const MlpRun resumed =
        RunMlp("", 0, saves.path() + "/" + CheckpointDirName(k), false, job);
    EXPECT_EQ(resumed.losses, Tail(plain.losses, k)) << "resumed at " << k;
    EXPECT_EQ(resumed.weights, plain.weights) << "resumed at " << k;
    EXPECT_EQ(resumed.skipped_steps, plain.skipped_steps) << "at " << k;
  }
  // Another precision cannot take these tensors.
  TempDir nvme;
  StoreOptions so =
      SmallStoreOptions(nvme.path(), 80 * 1024, kMlpHostBudget, 8 * kMiB);
  auto store = Store::Open(so);
  ASSERT_TRUE(store.ok()) << store.status();
  std::unique_ptr<Compute> compute = MakeCpuCompute(1);
  TrainOptions fp32 = MlpJob();
  auto model = Mlp::Create(store->get(), compute.get(), fp32.model);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<Resumed> r = ResumeMlp(saves.path(), **store, **model, fp32);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      r.status().message().find("--precision: checkpoint fp16, this run fp32"),
      std::string::npos)
      << r.status();
}

// Device-homed tensors are saved through Store::Read and restored through
// Store::Write; the offloaded run's losses are the resident run's. (Here the
// save's device reads share events with the step's trace, which the
// predictor then re-records, twice a save: harmless when nothing moves, and
// not asserted.)
TEST(CheckpointResumeTest, ResidentMlpResumesBitwise) {
  TempDir saves;
  const MlpRun plain = RunMlp("", 0, "", /*resident=*/true);
  const MlpRun saved = RunMlp(saves.path(), 5, "", /*resident=*/true);
  ASSERT_EQ(plain.losses.size(), 12u);
  EXPECT_EQ(saved.losses, plain.losses);
  EXPECT_EQ(plain.losses, RunMlp("", 0, "").losses);  // = offloaded
  const MlpRun resumed =
      RunMlp("", 0, saves.path() + "/" + CheckpointDirName(5), true);
  EXPECT_EQ(resumed.losses, Tail(plain.losses, 5));
  EXPECT_EQ(resumed.weights, plain.weights);
}

// A resume with another step size (a warned --batch / --accumulate change)
// weighs each saved step's loss as one of its own steps, so the epoch's
// mean loss stays a mean of step losses.
TEST(CheckpointResumeTest, ResumeWithAnotherStepSizeRescalesTheEpochSum) {
  TempDir saves;
  RunMlp(saves.path(), 3, "");
  const std::string path = saves.path() + "/" + CheckpointDirName(3);
  auto sum_for = [&](int64_t batch, int accumulate) -> double {
    TempDir nvme;
    StoreOptions so =
        SmallStoreOptions(nvme.path(), 80 * 1024, kMlpHostBudget, 8 * kMiB);
    TrainOptions job = MlpJob();
    job.model.batch = batch;
    job.model.accumulate = accumulate;
    auto store = Store::Open(so);
    EXPECT_TRUE(store.ok()) << store.status();
    std::unique_ptr<Compute> compute = MakeCpuCompute(1);
    auto model = Mlp::Create(store->get(), compute.get(), job.model);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!store.ok() || !model.ok()) return -1;
    auto resumed = ResumeMlp(path, **store, **model, job);
    EXPECT_TRUE(resumed.ok()) << resumed.status();
    return job.start_epoch_loss_sum;
  };
  const double same = sum_for(16, 1);
  ASSERT_GT(same, 0);
  EXPECT_EQ(sum_for(8, 2), same);  // 16 samples a step either way
  EXPECT_DOUBLE_EQ(sum_for(4, 1), same * 4 / 16);
}

TEST(CheckpointResumeTest, MlpResumeFromSaveDirTakesTheNewest) {
  TempDir saves;
  const MlpRun plain = RunMlp("", 0, "");
  RunMlp(saves.path(), 4, "");  // 4, 8, 12; 8 = an epoch's end
  std::filesystem::remove_all(saves.path() + "/" + CheckpointDirName(12));
  const MlpRun resumed = RunMlp("", 0, saves.path());
  EXPECT_EQ(resumed.losses, Tail(plain.losses, 8));
  EXPECT_EQ(resumed.weights, plain.weights);
}

// The GPT micro configuration on a byte shard of a repetitive text.
class GptResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 60; ++i) {
      text += "in the beginning was the word, and the word was with strata. ";
    }
    const std::string path = data_.path() + "/bytes.tok";
    auto writer = TokenShardWriter::Create(path, 256, 1);
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::vector<int32_t> tokens(text.begin(), text.end());
    ASSERT_TRUE((*writer)->Append(tokens).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
    auto reader = TokenShardReader::Open(path, 256, 1);
    ASSERT_TRUE(reader.ok()) << reader.status();
    shard_ = std::move(*reader);
  }

  static GptConfig Micro() {
    GptConfig c;
    c.layers = 2;
    c.heads = 2;
    c.embed = 64;
    c.context = 64;
    c.vocab = 256;
    c.batch = 2;
    c.seed = 9;
    c.adam.lr = 3e-3f;
    c.grad_clip = 1.0f;  // clips early: deferred and speculative steps
    c.classifier_rows = 48;
    return c;
  }

  struct Run {
    std::vector<double> losses;
    double final_loss = 0;
    std::vector<float> wte, fc;
    ClipStats clip;
    uint64_t rerecords = 0;
    uint64_t nvme_read_bytes = 0;
    int64_t adam_steps = 0, skipped_steps = 0;
    float loss_scale = 0;  // fp16's, at the end
    absl::Status resume_status;
  };

  Run Train(const std::string& save_dir, const std::string& resume,
            GptConfig c = Micro()) {
    auto f = ComputeGptFootprint(c);
    EXPECT_TRUE(f.ok()) << f.status();
    if (!f.ok()) return {};
    TempDir nvme;
    StoreOptions so =
        SmallStoreOptions(nvme.path(),
                          f->device_working_set_bytes +
                              f->largest_device_tensor_bytes + 64 * 1024,
                          f->optimizer_working_set_bytes +
                              2 * f->largest_tensor_bytes + 256 * 1024,
                          64 * kMiB);
    auto setup = OpenGptSetup(so, c);
    EXPECT_TRUE(setup.ok()) << setup.status();
    if (!setup.ok()) return {};
    Gpt& gpt = *(*setup)->model;
    Store& store = *(*setup)->store;
    LmTrainOptions o{.steps = 20, .warmup_steps = 2, .seed = 4};
    auto batches =
        LmBatcher::Create(shard_.get(), c.step_sequences(), c.context, o.seed);
    auto windows = ValidationWindows::Create(shard_.get(), c.context, 128);
    EXPECT_TRUE(batches.ok() && windows.ok());
    if (!batches.ok() || !windows.ok()) return {};
    if (!resume.empty()) {
      auto r = ResumeGpt(resume, store, gpt, *batches, o, "byte");
      if (!r.ok()) return {.resume_status = r.status()};
    }
    if (!save_dir.empty()) {
      o.after_step = [&](int64_t step,
                         absl::Span<const double> losses) -> absl::Status {
        return SaveCheckpoint(
                   store, GptCheckpoint(gpt, o, "byte", *batches, step, losses),
                   {.dir = save_dir, .keep = 20})
            .status();
      };
    }
    auto result = TrainLm(gpt, *batches, *windows, o);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    const Stats stats = store.GetStats();
    Run run{.losses = result->losses,
            .final_loss = result->final_loss,
            .clip = gpt.clip_stats(),
            .rerecords = stats.scheduler.rerecords,
            .nvme_read_bytes = stats.links[int(Link::kNvmeRead)].bytes,
            .adam_steps = gpt.steps(),
            .skipped_steps = gpt.skipped_steps(),
            .loss_scale = gpt.loss_scale() ? gpt.loss_scale()->scale() : 0};
    EXPECT_TRUE(gpt.ReadParameter("wte", &run.wte).ok());
    EXPECT_TRUE(gpt.ReadParameter("block1.fc.weight", &run.fc).ok());
    return run;
  }

  TempDir data_;
  std::unique_ptr<TokenShardReader> shard_;
};

TEST_F(GptResumeTest, GptMicroResumesBitwise) {
  TempDir saves;
  const Run plain = Train("", "");
  const Run saved = Train(saves.path(), "");
  ASSERT_EQ(plain.losses.size(), 20u);
  EXPECT_GT(plain.clip.clipped, 0);  // the clipping state is exercised
  EXPECT_EQ(saved.losses, plain.losses);
  EXPECT_EQ(saved.wte, plain.wte);
  EXPECT_LE(saved.rerecords, plain.rerecords + 1);  // 20 saves
  EXPECT_GT(plain.nvme_read_bytes, 0u);
  // At 19 the resumed run has one loss of its own; final_loss averages the
  // last two of the run's 20.
  for (int64_t k : {1, 3, 5, 19}) {
    const Run resumed = Train("", saves.path() + "/" + CheckpointDirName(k));
    EXPECT_EQ(resumed.losses, Tail(plain.losses, k)) << "resumed at " << k;
    EXPECT_EQ(resumed.wte, plain.wte) << "resumed at " << k;
    EXPECT_EQ(resumed.fc, plain.fc) << "resumed at " << k;
    EXPECT_EQ(resumed.clip.clipped, plain.clip.clipped);
    EXPECT_EQ(resumed.clip.deferred, plain.clip.deferred);
    // The mean of the run's last tenth, earlier steps' losses included.
    EXPECT_EQ(resumed.final_loss, plain.final_loss) << "resumed at " << k;
  }
}

TEST_F(GptResumeTest, Fp16GptResumesWithItsLossScaleAndSkips) {
  GptConfig c = Micro();
  c.precision = Precision::kFp16;
  c.loss_scale.initial_scale = 16777216.0f;  // the first steps overflow
  TempDir saves;
  const Run plain = Train("", "", c);
  const Run saved = Train(saves.path(), "", c);
  ASSERT_EQ(plain.losses.size(), 20u);
  ASSERT_GT(plain.skipped_steps, 1);
  EXPECT_EQ(plain.adam_steps + plain.skipped_steps, 20);
  EXPECT_EQ(saved.losses, plain.losses);
  // Resumed among the skips and after them: the same scale, skips, bits.
  for (int64_t k : {int64_t{1}, plain.skipped_steps + 2}) {
    const Run resumed = Train("", saves.path() + "/" + CheckpointDirName(k), c);
    ASSERT_TRUE(resumed.resume_status.ok()) << resumed.resume_status;
    EXPECT_EQ(resumed.losses, Tail(plain.losses, k)) << "resumed at " << k;
    EXPECT_EQ(resumed.wte, plain.wte) << "resumed at " << k;
    EXPECT_EQ(resumed.fc, plain.fc) << "resumed at " << k;
    EXPECT_EQ(resumed.skipped_steps, plain.skipped_steps);
    EXPECT_EQ(resumed.adam_steps, plain.adam_steps);
    EXPECT_EQ(resumed.loss_scale, plain.loss_scale);
  }
  // Another precision is another model: refused, naming the flag.
  GptConfig bf16 = c;
  bf16.precision = Precision::kBf16;
  const Run other = Train("", saves.path() + "/" + CheckpointDirName(3), bf16);
  EXPECT_EQ(other.resume_status.code(), absl::StatusCode::kInvalidArgument)
      << other.resume_status;
  EXPECT_NE(other.resume_status.message().find("precision"), std::string::npos)
      << other.resume_status;
}

}  // namespace
}  // namespace strata::train
