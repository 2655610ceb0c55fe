// stats_dict.cc: Stats as nested dicts: tiers and links by name, then the
// prefetch, scheduler and store-wide counters.
#include "python/src/stats_dict.h"

#include <nanobind/stl/string.h>

#include <string>

#include "strata/tensor.h"

namespace nb = nanobind;

namespace strata::python {
namespace {

nb::dict TierDict(const TierStats& t) {
  nb::dict d;
  d["capacity_bytes"] = t.capacity_bytes;
  d["used_bytes"] = t.used_bytes;
  d["peak_used_bytes"] = t.peak_used_bytes;
  d["leased_bytes"] = t.leased_bytes;
  d["evictions"] = t.evictions;
  d["compactions"] = t.compactions;
  return d;
}

nb::dict LinkDict(const LinkStats& l) {
  nb::dict d;
  d["bytes"] = l.bytes;
  d["transfers"] = l.transfers;
  d["failures"] = l.failures;
  d["busy_seconds"] = l.busy_seconds;
  d["gbps"] = l.gbps();
  return d;
}

nb::dict SchedulerDict(const SchedulerStats& s) {
  nb::dict d;
  d["steps"] = s.steps;
  d["accesses"] = s.accesses;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["nvme_read_floor_bytes"] = s.nvme_read_floor_bytes;
  d["nvme_write_floor_bytes"] = s.nvme_write_floor_bytes;
  d["plans"] = s.plans;
  d["planning_seconds"] = s.planning_seconds;
  d["plan_predicted_seconds"] = s.plan_predicted_seconds;
  return d;
}

}  // namespace

nb::dict StatsDict(const Stats& s) {
  nb::dict tiers, links, prefetch, d;
  for (int t = 0; t < kNumTiers; ++t) {
    tiers[std::string(TierName(static_cast<Tier>(t))).c_str()] =
        TierDict(s.tiers[t]);
  }
  for (int l = 0; l < kNumLinks; ++l) {
    links[std::string(LinkName(static_cast<Link>(l))).c_str()] =
        LinkDict(s.links[l]);
  }
  prefetch["issued"] = s.prefetch.issued;
  prefetch["hit"] = s.prefetch.hit;
  prefetch["late"] = s.prefetch.late;
  prefetch["wasted"] = s.prefetch.wasted;
  prefetch["failed"] = s.prefetch.failed;
  d["tiers"] = tiers;
  d["links"] = links;
  d["prefetch"] = prefetch;
  d["scheduler"] = SchedulerDict(s.scheduler);
  d["acquires"] = s.acquires;
  d["stalled_acquires"] = s.stalled_acquires;
  d["stall_seconds"] = s.stall_seconds;
  d["room_seconds"] = s.room_seconds;
  d["write_backs"] = s.write_backs;
  d["checksum_failures"] = s.checksum_failures;
  d["io_retries"] = s.io_retries;
  d["tensors"] = s.tensors;
  d["device_backend"] = s.device_backend;
  d["device_memory"] = s.device_memory;
  d["io_engine"] = s.io_engine;
  return d;
}

}  // namespace strata::python
