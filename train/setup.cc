// setup.cc: store + compute + model for one run (see setup.h).
#include "train/setup.h"

#include "strata/status.h"

namespace strata::train {

absl::Status MakeResident(TrainOptions& train, StoreOptions& store) {
  if (store.device.memory == DeviceMemory::kUnified) {
    return absl::InvalidArgumentError(
        "--resident homes every tensor on the device, which unified memory "
        "does not do (its tensors live in managed host memory and migrate): "
        "use --memory=copies with --resident, or drop --resident");
  }
  train.model.home = Tier::kDevice;
  train.model.optimizer_tier = Tier::kDevice;
  STRATA_ASSIGN_OR_RETURN(ModelFootprint f, ComputeFootprint(train.model));
  // A sixteenth more for allocation rounding (256 B per tensor).
  store.device.budget_bytes =
      f.total_bytes() + f.total_bytes() / 16 + 16 * kMiB;
  // Host copies only stage writes: the initial weights and input batches.
  store.host.budget_bytes = 2 * f.largest_tensor_bytes + 32 * kMiB;
  store.nvme.directories.clear();
  store.nvme.budget_bytes = 0;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TrainSetup>> OpenTrainSetup(
    const StoreOptions& store_options, TrainOptions& train) {
  if (train.model.home != Tier::kDevice) {
    train.model.home =
        store_options.nvme.budget_bytes > 0 ? Tier::kNvme : Tier::kHost;
  }
  auto setup = std::make_unique<TrainSetup>();
  STRATA_ASSIGN_OR_RETURN(setup->store, Store::Open(store_options));
  const Stats stats = setup->store->GetStats();
  if (stats.device_backend.rfind("cuda", 0) == 0) {
    STRATA_ASSIGN_OR_RETURN(setup->compute,
                            MakeCudaCompute(store_options.device.cuda_device));
  } else {
    setup->compute = MakeCpuCompute();
  }
  STRATA_ASSIGN_OR_RETURN(
      setup->model,
      Mlp::Create(setup->store.get(), setup->compute.get(), train.model));
  return setup;
}

}  // namespace strata::train
