// Compiled with the tiers' includes: the store is above them, so this must
// not build (tests/layering_check.cmake).
#include "src/store_core.h"
