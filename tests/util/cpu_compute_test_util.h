// cpu_compute_test_util.h: the fixture of the CpuCompute tests
// (tests/train/compute/compute_test.cc, cpu_adam_test.cc): a fresh CPU
// compute (OpenBLAS) for every test.
#ifndef STRATA_TESTS_UTIL_CPU_COMPUTE_TEST_UTIL_H_
#define STRATA_TESTS_UTIL_CPU_COMPUTE_TEST_UTIL_H_

#include <memory>

#include "gtest/gtest.h"
#include "train/compute/compute.h"

namespace strata::train::testing {

class CpuComputeTest : public ::testing::Test {
 protected:
  std::unique_ptr<Compute> compute_ = MakeCpuCompute();
};

}  // namespace strata::train::testing

#endif  // STRATA_TESTS_UTIL_CPU_COMPUTE_TEST_UTIL_H_
