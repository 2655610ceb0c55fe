// gpt_setup.cc: store + compute + Gpt for one run (see gpt_setup.h).
#include "train/gpt_setup.h"

#include "strata/status.h"
#include "train/setup.h"

namespace strata::train {

absl::Status MakeGptResident(GptConfig& model, StoreOptions& store) {
  GptConfig resident = model;
  resident.home = Tier::kDevice;
  resident.optimizer_tier = Tier::kDevice;
  // The classifier slice of the offloaded run's budget is kept, so both runs
  // compute the same slices: another slicing would change wte's gradient
  // sums.
  if (resident.classifier_rows <= 0) {
    resident.classifier_rows =
        ChooseClassifierRows(resident, store.device.budget_bytes);
  }
  STRATA_ASSIGN_OR_RETURN(ModelFootprint f, ComputeGptFootprint(resident));
  STRATA_RETURN_IF_ERROR(SetResidentBudgets(f, store));
  model = resident;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GptSetup>> OpenGptSetup(
    const StoreOptions& store_options, GptConfig& model) {
  if (model.home != Tier::kDevice) {
    model.home =
        store_options.nvme.budget_bytes > 0 ? Tier::kNvme : Tier::kHost;
  }
  auto setup = std::make_unique<GptSetup>();
  STRATA_RETURN_IF_ERROR(
      OpenStoreAndCompute(store_options, &setup->store, &setup->compute));
  if (model.classifier_rows <= 0) {
    model.classifier_rows = ChooseClassifierRows(
        model,
        setup->store->GetStats().tiers[int(Tier::kDevice)].capacity_bytes);
  }
  STRATA_ASSIGN_OR_RETURN(
      setup->model,
      Gpt::Create(setup->store.get(), setup->compute.get(), model));
  return setup;
}

}  // namespace strata::train
