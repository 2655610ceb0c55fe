// Compiled with base's includes: base is the lowest layer, so this must not
// build (tests/layering_check.cmake).
#include "tiers/nvme/block_io.h"
