// Compiled with the scheduler's includes: the store is above it, so this
// must not build (tests/layering_check.cmake).
#include "src/tensor_record.h"
