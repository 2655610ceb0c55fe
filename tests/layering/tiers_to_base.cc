// The control case: a downward include (tiers -> base) builds, so a failure
// of the others is the layering and not the harness
// (tests/layering_check.cmake).
#include "base/sync.h"
#include "strata/options.h"
#include "tiers/nvme/block_io.h"

int strata_layering_control() { return 0; }
