// machine_profile_fuzzer.cc: LoadMachineProfile, the reader of
// `--machine-profile` files (`strata bench --profile` writes them). An
// accepted profile keeps its promises, saves and loads back equal, and sets
// only valid NVMe settings on the store's options.
#include <cmath>
#include <string>

#include "strata/options.h"
#include "strata/profile.h"
#include "tests/fuzz/fuzz_target.h"

namespace strata::fuzz {
namespace {

void CheckPoints(const std::vector<LinkPoint>& points) {
  for (const LinkPoint& p : points) {
    STRATA_FUZZ_CHECK(std::isfinite(p.gbps) && p.gbps >= 0);
  }
}

}  // namespace
}  // namespace strata::fuzz

STRATA_FUZZ_TARGET(machine_profile) {
  using namespace strata;
  const std::string dir = fuzz::FreshScratchDir();
  fuzz::WriteFile(dir + "/profile.json", data);
  auto p = LoadMachineProfile(dir + "/profile.json");
  STRATA_FUZZ_CHECK_REFUSAL(p.status());
  if (!p.ok()) return false;
  fuzz::CheckPoints(p->h2d);
  fuzz::CheckPoints(p->d2h);
  STRATA_FUZZ_CHECK(p->nvme_block_size_bytes % 4096 == 0);
  STRATA_FUZZ_CHECK(p->nvme_queue_depth <= 4096);
  STRATA_FUZZ_CHECK(std::isfinite(p->nvme_read_gbps) && p->nvme_read_gbps >= 0);
  STRATA_FUZZ_CHECK(std::isfinite(p->nvme_write_gbps) &&
                    p->nvme_write_gbps >= 0);
  StoreOptions options;
  ApplyMachineProfile(*p, &options);
  STRATA_FUZZ_CHECK(options.nvme.block_size_bytes % 4096 == 0);
  STRATA_FUZZ_CHECK(options.nvme.queue_depth >= 1);
  STRATA_FUZZ_CHECK(SaveMachineProfile(*p, dir + "/again.json").ok());
  auto again = LoadMachineProfile(dir + "/again.json");
  STRATA_FUZZ_CHECK(again.ok());
  STRATA_FUZZ_CHECK(again->device == p->device &&
                    again->nvme_block_size_bytes == p->nvme_block_size_bytes &&
                    again->nvme_queue_depth == p->nvme_queue_depth &&
                    again->h2d.size() == p->h2d.size() &&
                    again->nvme_directory == p->nvme_directory);
  return true;
}
