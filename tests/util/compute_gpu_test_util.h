// compute_gpu_test_util.h: what the GPU compute tests (compute_gpu_test,
// transformer_gpu_test) share: device copies of host vectors, NaN poison for
// outputs, and tolerance checks against the CPU's results.
#ifndef STRATA_TESTS_UTIL_COMPUTE_GPU_TEST_UTIL_H_
#define STRATA_TESTS_UTIL_COMPUTE_GPU_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

#if defined(STRATA_HAVE_CUDA)
#include <cuda_runtime.h>

#include "base/cuda_status.h"
#endif

namespace strata::train::testing {

// A device copy of a host vector, freed on destruction. Uploads and
// downloads wait for the whole device, since the compute's stream does not
// synchronise with the legacy default stream cudaMemcpy uses.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
#if defined(STRATA_HAVE_CUDA)
    Expect(cudaMalloc(&ptr_, bytes()), "cudaMalloc");
    Expect(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice),
           "cudaMemcpy H2D");
    Expect(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#else
    ADD_FAILURE() << "built without CUDA";
#endif
  }
  ~DeviceArray() {
#if defined(STRATA_HAVE_CUDA)
    cudaFree(ptr_);
#endif
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }

  std::vector<T> ToHost() const {
    std::vector<T> host(size_);
#if defined(STRATA_HAVE_CUDA)
    Expect(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    Expect(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost),
           "cudaMemcpy D2H");
#endif
    return host;
  }

 private:
  size_t bytes() const { return size_ * sizeof(T); }
#if defined(STRATA_HAVE_CUDA)
  static void Expect(cudaError_t err, const char* what) {
    const absl::Status status = CudaStatus(err, what);
    EXPECT_TRUE(status.ok()) << status;
  }
#endif

  const size_t size_;
  T* ptr_ = nullptr;
};

// Poison for outputs, so an op that skips an element shows up.
inline std::vector<float> Poison(int64_t n) {
  return std::vector<float>(n, std::nanf(""));
}

// |got[i] - want[i]| <= rtol * scale[i] + atol, scale defaulting to |want|.
inline void ExpectClose(const std::vector<float>& got,
                        const std::vector<float>& want, double rtol,
                        double atol, const char* what,
                        const std::vector<double>* scale = nullptr) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double s = scale != nullptr ? (*scale)[i] : std::abs(want[i]);
    ASSERT_NEAR(got[i], want[i], rtol * s + atol) << what << "[" << i << "]";
  }
}

// The largest |v[i]| (0 for an empty v).
inline double MaxAbs(const std::vector<float>& v) {
  double max = 0.0;
  for (float x : v) max = std::max(max, double{std::abs(x)});
  return max;
}

// |got[i] - want[i]| <= rtol * (|want[i]| + max |want|): relative to the
// tensor's own size, for sums whose terms cancel (a float sum's error scales
// with its terms, not with the result).
inline void ExpectCloseToMax(const std::vector<float>& got,
                             const std::vector<float>& want, double rtol,
                             const char* what) {
  ExpectClose(got, want, rtol, rtol * MaxAbs(want) + 1e-30, what);
}

}  // namespace strata::train::testing

#endif  // STRATA_TESTS_UTIL_COMPUTE_GPU_TEST_UTIL_H_
