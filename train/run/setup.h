// setup.h: everything one training run needs — the store, the compute that
// matches its device, the model — opened in the right order, for
// `strata train`, the training bench and tests.
#ifndef STRATA_TRAIN_RUN_SETUP_H_
#define STRATA_TRAIN_RUN_SETUP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "strata/options.h"
#include "strata/store.h"
#include "train/comm/collectives.h"
#include "train/compute/compute.h"
#include "train/model/model.h"
#include "train/run/trainer.h"

namespace strata::train {

// Rewrites `store` and `train` for a fully resident run: every tensor homed
// on a device budget that holds them all, Adam on the device, no NVMe tier;
// the host keeps only staging room. InvalidArgument for a bad model config.
absl::Status MakeResident(TrainOptions& train, StoreOptions& store);

// The budgets of a fully resident run of a model of footprint `f`: a device
// budget that holds every tensor, host room only to stage writes, no NVMe
// tier. InvalidArgument for unified memory (its tensors live on the host).
absl::Status SetResidentBudgets(const ModelFootprint& f, StoreOptions& store);

// Opens the store and the compute for its device backend (cuBLAS for
// "cuda:...", OpenBLAS with `cpu_threads` threads for the simulated device;
// 0: OpenBLAS's default). Errors: Store::Open's and MakeCudaCompute's.
absl::Status OpenStoreAndCompute(const StoreOptions& options,
                                 std::unique_ptr<Store>* store,
                                 std::unique_ptr<Compute>* compute,
                                 int cpu_threads = 0);

// The transport a sharded model on `compute` uses: `collectives` on the CPU;
// on a CUDA GPU NCCL, made here into `*gpu` and bootstrapped by
// `collectives` (MPI), unless it is NCCL already. Null without
// `collectives`. Errors: MakeNcclCollectives'.
absl::StatusOr<Collectives*> ModelTransport(const Compute& compute,
                                            Collectives* collectives,
                                            std::unique_ptr<Collectives>* gpu);

struct TrainSetup {
  std::unique_ptr<Store> store;
  std::unique_ptr<Compute> compute;  // OpenBLAS, or cuBLAS on a real GPU
  std::unique_ptr<Collectives> gpu_collectives;  // NCCL (ModelTransport)
  std::unique_ptr<Mlp> model;                    // destroyed before the store
  ~TrainSetup() { model.reset(); }
};

// Opens the store, picks the compute for its device backend (cuBLAS for
// "cuda:...", OpenBLAS for the simulated device) and creates the model.
// Unless `train.model.home` is kDevice, the home tier becomes NVMe when the
// store has one and host otherwise. With `collectives` (not owned) the
// model is that rank's of a sharded run (Mlp::Create; on a CUDA GPU over
// NCCL bootstrapped by it, ModelTransport), its OpenBLAS sharing the cores
// with the other ranks on this machine (`cpu_threads`).
// Errors: those of Store::Open, MakeCudaCompute and Mlp::Create.
absl::StatusOr<std::unique_ptr<TrainSetup>> OpenTrainSetup(
    const StoreOptions& store, TrainOptions& train,
    Collectives* collectives = nullptr, int cpu_threads = 0);

}  // namespace strata::train

#endif  // STRATA_TRAIN_RUN_SETUP_H_
