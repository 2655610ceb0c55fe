// compute.cc: checks shared by every Compute implementation (see compute.h).
#include "train/compute/compute.h"

#include <climits>

#include "absl/strings/str_format.h"

namespace strata::train {

absl::Status CheckLinearDims(int64_t batch, int64_t in, int64_t out) {
  for (int64_t dim : {batch, in, out}) {
    if (dim < 0 || dim > INT_MAX) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "linear layer dimensions batch=%d in=%d out=%d must be in [0, %d]",
          batch, in, out, INT_MAX));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGemmArgs(bool trans_a, bool trans_b, int64_t m, int64_t n,
                           int64_t k, int64_t lda, int64_t ldb, float beta,
                           int64_t ldc) {
  for (int64_t dim : {m, n, k, lda, ldb, ldc}) {
    if (dim < 0 || dim > INT_MAX) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "gemm dimensions m=%d n=%d k=%d lda=%d ldb=%d ldc=%d must be in "
          "[0, %d]",
          m, n, k, lda, ldb, ldc, INT_MAX));
    }
  }
  if (beta != 0.0f && beta != 1.0f) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gemm beta must be 0 or 1, got %g", beta));
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  const int64_t a_cols = trans_a ? m : k;
  const int64_t b_cols = trans_b ? k : n;
  if (ldc < n || (k > 0 && (lda < a_cols || ldb < b_cols))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "gemm strides lda=%d ldb=%d ldc=%d are shorter than their rows "
        "(%d, %d, %d)",
        lda, ldb, ldc, a_cols, b_cols, n));
  }
  return absl::OkStatus();
}

absl::Status CheckHalfArgs(Precision type, int64_t n, const char* op) {
  if (absl::Status s = CheckHalfPrecision(type, op); !s.ok()) return s;
  if (n >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s of a negative count %d", op, n));
}

}  // namespace strata::train
