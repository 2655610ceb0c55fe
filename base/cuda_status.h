// cuda_status.h: CUDA runtime errors as absl::Status, the one wording every
// CUDA caller in strata uses (DESIGN.md, Errors: Internal, with the error's
// name): "cudaMemcpyAsync(...) failed: cudaErrorInvalidValue: invalid
// argument".
//
//   CudaErrorText(err)            "cudaErrorNoDevice: no CUDA-capable ..."
//   CudaStatus(err, call)         OK, or Internal "<call> failed: <text>"
//   CudaLaunchStatus(kernel)      CudaStatus of cudaGetLastError(): a kernel
//                                 launch reports bad configurations only there
//   STRATA_CUDA_RETURN_IF_ERROR(call)
//                                 evaluates a CUDA runtime call and returns
//                                 CudaStatus naming it when it fails
//
// Each clears the calling thread's last CUDA error when it reports one, so a
// later launch check does not report the same error again. Codes other than
// Internal (a missing device is FailedPrecondition, an allocation that does
// not fit ResourceExhausted) are the caller's to choose before calling these.
//
// Header-only, and only for files built with the CUDA toolkit (cuda_*.cc and
// *.cu, compiled where STRATA_HAVE_CUDA is defined); it needs the CUDA include
// path. Compiles as C++17 for nvcc.
#ifndef STRATA_BASE_CUDA_STATUS_H_
#define STRATA_BASE_CUDA_STATUS_H_

#if !defined(STRATA_HAVE_CUDA)
#error "base/cuda_status.h is for CUDA builds only (STRATA_HAVE_CUDA)"
#endif

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace strata {

// "<error name>: <error description>"; clears the thread's last error.
inline std::string CudaErrorText(cudaError_t err) {
  cudaGetLastError();
  return absl::StrCat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

// OK for cudaSuccess, else Internal("<call> failed: <CudaErrorText>").
inline absl::Status CudaStatus(cudaError_t err, absl::string_view call) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(call, " failed: ", CudaErrorText(err)));
}

// The status of the kernel launch just issued on this thread, named `kernel`.
inline absl::Status CudaLaunchStatus(absl::string_view kernel) {
  return CudaStatus(cudaGetLastError(), kernel);
}

}  // namespace strata

// Evaluates the CUDA runtime call `call` once; returns CudaStatus naming it
// (its source text) from the enclosing function when it fails.
#define STRATA_CUDA_RETURN_IF_ERROR(call)                                     \
  do {                                                                        \
    ::absl::Status strata_cuda_status_ = ::strata::CudaStatus((call), #call); \
    if (!strata_cuda_status_.ok()) return strata_cuda_status_;                \
  } while (0)

#endif  // STRATA_BASE_CUDA_STATUS_H_
