// compute.cc: checks shared by every Compute implementation (see compute.h).
#include "train/compute.h"

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

}  // namespace strata::train
