// setup.cc: store + compute + model for one run (see setup.h).
#include "train/run/setup.h"

#include "strata/status.h"

namespace strata::train {

absl::Status SetResidentBudgets(const ModelFootprint& f, StoreOptions& store) {
  if (store.device.memory == DeviceMemory::kUnified) {
    return absl::InvalidArgumentError(
        "--resident homes every tensor on the device, which unified memory "
        "does not do (its tensors live in managed host memory and migrate): "
        "use --memory=copies with --resident, or drop --resident");
  }
  // A sixteenth more for allocation rounding (256 B per tensor).
  store.device.budget_bytes =
      f.total_bytes() + f.total_bytes() / 16 + 16 * kMiB;
  // Host copies only stage writes: the initial weights and input batches.
  store.host.budget_bytes = 2 * f.largest_tensor_bytes + 32 * kMiB;
  store.nvme.directories.clear();
  store.nvme.budget_bytes = 0;
  return absl::OkStatus();
}

absl::Status MakeResident(TrainOptions& train, StoreOptions& store) {
  ModelConfig resident = train.model;
  resident.home = Tier::kDevice;
  resident.optimizer_tier = Tier::kDevice;
  STRATA_ASSIGN_OR_RETURN(ModelFootprint f, ComputeFootprint(resident));
  STRATA_RETURN_IF_ERROR(SetResidentBudgets(f, store));
  train.model = resident;
  return absl::OkStatus();
}

absl::Status OpenStoreAndCompute(const StoreOptions& options,
                                 std::unique_ptr<Store>* store,
                                 std::unique_ptr<Compute>* compute,
                                 int cpu_threads) {
  STRATA_ASSIGN_OR_RETURN(*store, Store::Open(options));
  if ((*store)->GetStats().device_backend.rfind("cuda", 0) == 0) {
    STRATA_ASSIGN_OR_RETURN(*compute,
                            MakeCudaCompute(options.device.cuda_device));
  } else {
    *compute = MakeCpuCompute(cpu_threads);
  }
  return absl::OkStatus();
}

absl::StatusOr<Collectives*> ModelTransport(const Compute& compute,
                                            Collectives* collectives,
                                            std::unique_ptr<Collectives>* gpu) {
  if (collectives == nullptr || compute.stream() == nullptr ||
      collectives->name() == "nccl") {
    return collectives;
  }
  const double timeout = collectives->timeout_seconds();
  STRATA_ASSIGN_OR_RETURN(
      *gpu, MakeNcclCollectives(*collectives, timeout > 0 ? timeout : 300));
  return gpu->get();
}

absl::StatusOr<std::unique_ptr<TrainSetup>> OpenTrainSetup(
    const StoreOptions& store_options, TrainOptions& train,
    Collectives* collectives, int cpu_threads) {
  if (train.model.home != Tier::kDevice) {
    train.model.home =
        store_options.nvme.budget_bytes > 0 ? Tier::kNvme : Tier::kHost;
  }
  auto setup = std::make_unique<TrainSetup>();
  STRATA_RETURN_IF_ERROR(OpenStoreAndCompute(store_options, &setup->store,
                                             &setup->compute, cpu_threads));
  STRATA_ASSIGN_OR_RETURN(
      Collectives * transport,
      ModelTransport(*setup->compute, collectives, &setup->gpu_collectives));
  STRATA_ASSIGN_OR_RETURN(setup->model,
                          Mlp::Create(setup->store.get(), setup->compute.get(),
                                      train.model, transport));
  return setup;
}

}  // namespace strata::train
