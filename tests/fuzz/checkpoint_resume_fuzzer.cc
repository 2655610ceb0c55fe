// checkpoint_resume_fuzzer.cc: `strata train --model=mlp --resume`, as
// ResumeMlp takes a checkpoint into a model: the configuration compared
// with this run's, the tensors restored into the store, the trainer's state
// (step counters, RNG, loss scale) parsed. The input is manifest.json and
// tensors.bin joined by kPartSeparator, the manifest resealed; the model is
// make_seeds.cc's tiny MLP (4 inputs, width 3, depth 1, 2 classes), made
// once. A resume that succeeds starts at the checkpoint's step.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "strata/store.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/util/test_util.h"
#include "train/compute/compute.h"
#include "train/io/checkpoint_manifest.h"
#include "train/model/model.h"
#include "train/run/train_checkpoint.h"

namespace strata::fuzz {
namespace {

// The job every seed of this target was saved from (make_seeds.cc).
train::TrainOptions Job() {
  train::TrainOptions job;
  job.model.inputs = 4;
  job.model.width = 3;
  job.model.depth = 1;
  job.model.classes = 2;
  job.model.batch = 2;
  job.max_steps = 1000;
  return job;
}

// A store (its NVMe files in a directory of their own: the scratch one is
// emptied by each input) and the model, kept for the whole campaign.
struct Model {
  Model() {
    auto s = Store::Open(
        testing::SmallStoreOptions(nvme.path(), 1 << 20, 1 << 20, 8 << 20));
    if (!s.ok()) Fail("cannot open the store", __FILE__, __LINE__);
    store = std::move(*s);
    compute = train::MakeCpuCompute(1);
    auto m = train::Mlp::Create(store.get(), compute.get(), Job().model);
    if (!m.ok()) Fail("cannot make the model", __FILE__, __LINE__);
    mlp = std::move(*m);
  }
  testing::TempDir nvme;  // under $TMPDIR: the store's files need O_DIRECT
  std::unique_ptr<Store> store;
  std::unique_ptr<train::Compute> compute;
  std::unique_ptr<train::Mlp> mlp;
};

}  // namespace
}  // namespace strata::fuzz

STRATA_FUZZ_TARGET(checkpoint_resume) {
  using namespace strata;
  static fuzz::Model model_once;  // closed at exit, its directory removed
  fuzz::Model* model = &model_once;
  const std::vector<std::string_view> parts = fuzz::SplitParts(data, 2);
  const std::string save = fuzz::FreshScratchDir() + "/save";
  const std::string step = save + "/step-00000001";
  std::filesystem::create_directories(step);
  fuzz::WriteFile(step + "/manifest.json",
                  train::ResealManifest(std::string(parts[0])));
  fuzz::WriteFile(step + "/tensors.bin", parts[1]);
  train::TrainOptions job = fuzz::Job();
  auto resumed = train::ResumeMlp(save, *model->store, *model->mlp, job);
  STRATA_FUZZ_CHECK_REFUSAL(resumed.status());
  if (!resumed.ok()) return false;
  STRATA_FUZZ_CHECK(job.start_step == resumed->step);
  STRATA_FUZZ_CHECK(resumed->step > 0 && resumed->step < job.max_steps);
  return true;
}
