// Compiled with the tiers' includes: tiers know nothing of the scheduler,
// so this must not build (tests/layering_check.cmake).
#include "scheduler/predictor.h"
