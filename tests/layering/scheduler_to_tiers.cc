// Compiled with the scheduler's includes: it sees tiers only through the
// store's snapshot, so this must not build (tests/layering_check.cmake).
#include "tiers/nvme/block_io.h"
