// gpt_setup.cc: store + compute + Gpt for one run (see gpt_setup.h).
#include "train/gpt_setup.h"

#include "strata/status.h"

namespace strata::train {

absl::Status MakeGptResident(GptConfig& model, StoreOptions& store) {
  if (store.device.memory == DeviceMemory::kUnified) {
    return absl::InvalidArgumentError(
        "--resident homes every tensor on the device, which unified memory "
        "does not do: use --memory=copies with --resident, or drop "
        "--resident");
  }
  model.home = Tier::kDevice;
  model.optimizer_tier = Tier::kDevice;
  // The classifier slice of the offloaded run's default budget is kept
  // (ChooseClassifierRows at the device budget given), so both runs compute
  // the same slices: a different slicing would change wte's gradient sums.
  if (model.classifier_rows <= 0) {
    model.classifier_rows =
        ChooseClassifierRows(model, store.device.budget_bytes);
  }
  STRATA_ASSIGN_OR_RETURN(ModelFootprint f, ComputeGptFootprint(model));
  // A sixteenth more for allocation rounding (256 B per tensor).
  store.device.budget_bytes =
      f.total_bytes() + f.total_bytes() / 16 + 16 * kMiB;
  // Host copies only stage writes: the initial weights and the tokens.
  store.host.budget_bytes = 2 * f.largest_tensor_bytes + 32 * kMiB;
  store.nvme.directories.clear();
  store.nvme.budget_bytes = 0;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GptSetup>> OpenGptSetup(
    const StoreOptions& store_options, GptConfig& model) {
  if (model.home != Tier::kDevice) {
    model.home =
        store_options.nvme.budget_bytes > 0 ? Tier::kNvme : Tier::kHost;
  }
  auto setup = std::make_unique<GptSetup>();
  STRATA_ASSIGN_OR_RETURN(setup->store, Store::Open(store_options));
  const Stats stats = setup->store->GetStats();
  if (stats.device_backend.rfind("cuda", 0) == 0) {
    STRATA_ASSIGN_OR_RETURN(setup->compute,
                            MakeCudaCompute(store_options.device.cuda_device));
  } else {
    setup->compute = MakeCpuCompute();
  }
  if (model.classifier_rows <= 0) {
    model.classifier_rows = ChooseClassifierRows(
        model, stats.tiers[int(Tier::kDevice)].capacity_bytes);
  }
  STRATA_ASSIGN_OR_RETURN(
      setup->model,
      Gpt::Create(setup->store.get(), setup->compute.get(), model));
  return setup;
}

}  // namespace strata::train
