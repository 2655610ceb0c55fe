// precision_flags.cc: the mixed-precision flags (see precision_flags.h).
#include "apps/cli/precision_flags.h"

#include <cmath>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/compute/precision.h"
#include "train/model/loss_scale.h"

ABSL_FLAG(std::string, precision, "fp32",
          "Number format of parameters and gradients: fp32, bf16 or fp16. "
          "16-bit ones are what the device computes with (matmuls summed in "
          "fp32) and what crosses the host<->device link, 2 bytes up and 2 "
          "down per parameter and step; fp32 master weights and Adam's "
          "moments stay where the optimizer runs. fp16 scales the loss "
          "dynamically (--loss-scale). A step with a non-finite gradient is "
          "skipped and counted (skipped_steps).");
ABSL_FLAG(std::string, rounding, "nearest",
          "How master weights round to the 16-bit parameters: nearest "
          "(to nearest even) or stochastic (seeded per tensor and step from "
          "--seed, so runs still repeat bit for bit). bf16/fp16 only.");
ABSL_FLAG(double, loss_scale, strata::train::LossScaleOptions{}.initial_scale,
          "fp16's initial loss scale, a power of two in [1, 2^24]: halved "
          "(and the step "
          "skipped) when a gradient overflows, doubled after 1000 clean "
          "steps, never below 1. fp16 only; a resumed run goes on with the "
          "checkpoint's scale.");

namespace strata {
namespace {

// The default of --loss-scale: LossScaleOptions' (2^16).
constexpr double kDefaultLossScale = train::LossScaleOptions{}.initial_scale;

}  // namespace

absl::Status PrecisionFromFlags(train::Precision& precision,
                                train::Rounding& rounding,
                                train::LossScaleOptions& loss_scale) {
  // Named as the other choice flags are: "--precision=fp8: use ...".
  auto flag_error = [](const char* flag, const std::string& value,
                       const absl::Status& s) {
    return absl::Status(
        s.code(), absl::StrFormat("--%s=%s: %s", flag, value, s.message()));
  };
  const std::string p = absl::GetFlag(FLAGS_precision);
  absl::StatusOr<train::Precision> parsed = train::ParsePrecision(p);
  if (!parsed.ok()) return flag_error("precision", p, parsed.status());
  precision = *parsed;
  const std::string r = absl::GetFlag(FLAGS_rounding);
  absl::StatusOr<train::Rounding> round = train::ParseRounding(r);
  if (!round.ok()) return flag_error("rounding", r, round.status());
  rounding = *round;
  const double scale = absl::GetFlag(FLAGS_loss_scale);
  if (scale != kDefaultLossScale && precision != train::Precision::kFp16) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--loss-scale scales fp16's loss: it needs --precision=fp16 (this "
        "run is --precision=%s)",
        train::PrecisionName(precision)));
  }
  // Checked as the double given, before it becomes a float that could round
  // to a power of two.
  int exponent = 0;
  if (!(scale >= 1 && scale <= loss_scale.max_scale) ||
      std::frexp(scale, &exponent) != 0.5) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--loss-scale=%.17g: must be a power of two in [1, %.0f] (e.g. "
        "65536), so that unscaling by its inverse is exact",
        scale, loss_scale.max_scale));
  }
  loss_scale.initial_scale = static_cast<float>(scale);
  return absl::OkStatus();
}

}  // namespace strata
