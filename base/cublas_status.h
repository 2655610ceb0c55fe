// cublas_status.h: cuBLAS errors as absl::Status, worded like CUDA runtime
// errors (base/cuda_status.h): "cublasSgemm(...) failed:
// CUBLAS_STATUS_INVALID_VALUE: an invalid numeric value was used as an
// argument".
//
//   CublasStatus(status, call)   OK, or Internal "<call> failed: <name>:
//   <text>" STRATA_CUBLAS_RETURN_IF_ERROR(call)
//                                evaluates a cuBLAS call and returns
//                                CublasStatus naming it when it fails
//
// Header-only, for files built with CUDA that link cuBLAS (train/cuda_*).
#ifndef STRATA_BASE_CUBLAS_STATUS_H_
#define STRATA_BASE_CUBLAS_STATUS_H_

#if !defined(STRATA_HAVE_CUDA)
#error "base/cublas_status.h is for CUDA builds only (STRATA_HAVE_CUDA)"
#endif

#include <cublas_v2.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace strata {

// OK for CUBLAS_STATUS_SUCCESS, else Internal("<call> failed: <status name>:
// <status description>").
inline absl::Status CublasStatus(cublasStatus_t status,
                                 absl::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(call, " failed: ", cublasGetStatusName(status), ": ",
                   cublasGetStatusString(status)));
}

}  // namespace strata

// Evaluates the cuBLAS call `call` once; returns CublasStatus naming it from
// the enclosing function when it fails.
#define STRATA_CUBLAS_RETURN_IF_ERROR(call)                        \
  do {                                                             \
    ::absl::Status strata_cublas_status_ =                         \
        ::strata::CublasStatus((call), #call);                     \
    if (!strata_cublas_status_.ok()) return strata_cublas_status_; \
  } while (0)

#endif  // STRATA_BASE_CUBLAS_STATUS_H_
