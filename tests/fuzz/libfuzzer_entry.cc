// libfuzzer_entry.cc: the entry libFuzzer calls, in a binary that links
// exactly one target (the `fuzz` preset builds one per target).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  if (strata::fuzz::Targets().size() != 1) {
    std::fprintf(stderr, "a fuzz binary links exactly one target\n");
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)strata::fuzz::Targets()[0].fn(
      {reinterpret_cast<const char*>(data), size});
  return 0;
}
