// gpt_setup.cc: store + compute + Gpt for one run (see gpt_setup.h).
#include "train/run/gpt_setup.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "base/byte_size.h"
#include "strata/status.h"
#include "train/run/setup.h"

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
    const StoreOptions& store_options, GptConfig& model,
    Collectives* collectives, int cpu_threads) {
  if (model.home != Tier::kDevice) {
    model.home =
        store_options.nvme.budget_bytes > 0 ? Tier::kNvme : Tier::kHost;
  }
  auto setup = std::make_unique<GptSetup>();
  STRATA_RETURN_IF_ERROR(OpenStoreAndCompute(store_options, &setup->store,
                                             &setup->compute, cpu_threads));
  const uint64_t device =
      setup->store->GetStats().tiers[int(Tier::kDevice)].capacity_bytes;
  if (model.classifier_rows <= 0) {
    // The slice follows the budget and the need follows the slice: a budget
    // below the point where they meet is refused naming that point (the
    // need at this budget's slice would be too low to give back).
    STRATA_ASSIGN_OR_RETURN(
        const uint64_t need,
        DeviceBudgetForOwnSlice(model, collectives ? collectives->size() : 0));
    if (device < need) {
      // Rounded up, so that the value printed is enough when given back.
      const double mib = std::ceil(10.0 * need / kMiB) / 10;
      return absl::ResourceExhaustedError(absl::StrFormat(
          "device budget %s is below the GPT's largest operation's working "
          "set; raise --device-budget to at least %.1fMiB (the classifier's "
          "slice of token rows is an eighth of the budget, so the need grows "
          "with it; this is where they meet%s), or lower --batch/--context/"
          "--embed/--vocab",
          FormatByteSize(device), mib,
          collectives ? "; --distributed adds the gather slots, two blocks' "
                        "and the embeddings' whole parameters and gradients"
                      : ""));
    }
    model.classifier_rows = ChooseClassifierRows(model, device);
  }
  STRATA_ASSIGN_OR_RETURN(
      Collectives * transport,
      ModelTransport(*setup->compute, collectives, &setup->gpu_collectives));
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<Gpt> gpt,
      Gpt::Create(setup->store.get(), setup->compute.get(), model, transport));
  setup->model = std::move(gpt);
  return setup;
}

}  // namespace strata::train
