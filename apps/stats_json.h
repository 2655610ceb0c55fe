// stats_json.h: parts of strata::Stats as JSON, shared by the commands'
// --json reports.
#ifndef STRATA_APPS_STATS_JSON_H_
#define STRATA_APPS_STATS_JSON_H_

#include <nlohmann/json.hpp>

#include "strata/stats.h"

namespace strata {

// {"prefetches", "evictions", "discards", "read_mostly", "faults",
// "fault_bytes"}: zeros with explicit copies.
inline nlohmann::json UnifiedJson(const UnifiedStats& u) {
  return {{"prefetches", u.prefetches}, {"evictions", u.evictions},
          {"discards", u.discards},     {"read_mostly", u.read_mostly},
          {"faults", u.faults},         {"fault_bytes", u.fault_bytes}};
}

}  // namespace strata

#endif  // STRATA_APPS_STATS_JSON_H_
