// stats_dict.h: Store.stats() as a dict, keyed as the train JSON's "store"
// report is (docs/api.md, Statistics).
#ifndef STRATA_PYTHON_SRC_STATS_DICT_H_
#define STRATA_PYTHON_SRC_STATS_DICT_H_

#include <nanobind/nanobind.h>

#include "strata/stats.h"

namespace strata::python {

nanobind::dict StatsDict(const Stats& stats);

}  // namespace strata::python

#endif  // STRATA_PYTHON_SRC_STATS_DICT_H_
