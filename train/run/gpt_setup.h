// gpt_setup.h: the store, compute and Gpt of one language-model run, opened
// in the right order (as setup.h does for the MLP).
#ifndef STRATA_TRAIN_RUN_GPT_SETUP_H_
#define STRATA_TRAIN_RUN_GPT_SETUP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "strata/options.h"
#include "strata/store.h"
#include "train/compute/compute.h"
#include "train/model/gpt.h"
#include "train/model/gpt_config.h"

namespace strata::train {

// Rewrites `store` and `model` for a fully resident run: every tensor homed
// on a device budget that holds them all, AdamW on the device, no NVMe tier.
// InvalidArgument for a bad config or unified memory.
absl::Status MakeGptResident(GptConfig& model, StoreOptions& store);

struct GptSetup {
  std::unique_ptr<Store> store;
  std::unique_ptr<Compute> compute;  // OpenBLAS, or cuBLAS on a real GPU
  std::unique_ptr<Collectives> gpu_collectives;  // NCCL (ModelTransport)
  std::unique_ptr<Gpt> model;                    // destroyed before the store
  ~GptSetup() { model.reset(); }
};

// Opens the store, the compute for its device and the model. Unless
// `model.home` is kDevice, the home tier becomes NVMe when the store has one
// and host otherwise; model.classifier_rows is chosen for the device budget
// when 0. `collectives`: one rank of a sharded run (Gpt::Create; on a CUDA
// GPU over NCCL, bootstrapped by it: ModelTransport);
// `cpu_threads` as for OpenStoreAndCompute (setup.h). Errors: those of
// Store::Open, MakeCudaCompute and Gpt::Create.
absl::StatusOr<std::unique_ptr<GptSetup>> OpenGptSetup(
    const StoreOptions& store, GptConfig& model,
    Collectives* collectives = nullptr, int cpu_threads = 0);

}  // namespace strata::train

#endif  // STRATA_TRAIN_RUN_GPT_SETUP_H_
