// Compiled with the workloads' includes: they use the store through its
// public API, so its internals must not build here
// (tests/layering_check.cmake).
#include "src/store_core.h"
