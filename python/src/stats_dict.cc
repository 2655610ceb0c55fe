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
  d["allocations"] = t.allocations;
  d["frees"] = t.frees;
  d["evictions"] = t.evictions;
  d["compactions"] = t.compactions;
  d["relocated_bytes"] = t.relocated_bytes;
  return d;
}

nb::dict LinkDict(const LinkStats& l) {
  nb::dict d;
  d["bytes"] = l.bytes;
  d["transfers"] = l.transfers;
  d["failures"] = l.failures;
  d["busy_seconds"] = l.busy_seconds;
  d["active_seconds"] = l.active_seconds;
  d["gbps"] = l.gbps();
  return d;
}

nb::dict SchedulerDict(const SchedulerStats& s) {
  nb::dict d;
  d["steps"] = s.steps;
  d["accesses"] = s.accesses;
  d["hits"] = s.hits;
  d["resyncs"] = s.resyncs;
  d["misses"] = s.misses;
  d["rerecords"] = s.rerecords;
  d["nvme_read_floor_bytes"] = s.nvme_read_floor_bytes;
  d["nvme_write_floor_bytes"] = s.nvme_write_floor_bytes;
  d["plans"] = s.plans;
  d["planning_seconds"] = s.planning_seconds;
  nb::dict planned;
  for (int l = 0; l < kNumLinks; ++l) {
    planned[std::string(LinkName(static_cast<Link>(l))).c_str()] =
        s.planned_link_bytes[l];
  }
  d["planned_link_bytes"] = planned;
  d["plan_bound_seconds"] = s.plan_bound_seconds;
  d["plan_predicted_seconds"] = s.plan_predicted_seconds;
  return d;
}

nb::dict UnifiedDict(const UnifiedStats& u) {
  nb::dict d;
  d["prefetches"] = u.prefetches;
  d["evictions"] = u.evictions;
  d["discards"] = u.discards;
  d["read_mostly"] = u.read_mostly;
  d["faults"] = u.faults;
  d["fault_bytes"] = u.fault_bytes;
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
  d["queued_loads"] = s.queued_loads;
  d["queued_loads_in_flight"] = s.queued_loads_in_flight;
  d["device_reader_waits"] = s.device_reader_waits;
  d["checksum_failures"] = s.checksum_failures;
  d["checksum_rereads"] = s.checksum_rereads;
  d["io_retries"] = s.io_retries;
  d["tensors"] = s.tensors;
  d["unified"] = UnifiedDict(s.unified);
  d["device_backend"] = s.device_backend;
  d["device_memory"] = s.device_memory;
  d["io_engine"] = s.io_engine;
  return d;
}

}  // namespace strata::python
