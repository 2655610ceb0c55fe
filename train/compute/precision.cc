// precision.cc: names of the precisions and roundings (see precision.h).
#include "train/compute/precision.h"

#include "absl/strings/str_format.h"

namespace strata::train {
namespace {

constexpr Precision kPrecisions[] = {Precision::kFp32, Precision::kBf16,
                                     Precision::kFp16};
constexpr Rounding kRoundings[] = {Rounding::kNearestEven,
                                   Rounding::kStochastic};

}  // namespace

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

absl::StatusOr<Precision> ParsePrecision(std::string_view name) {
  for (Precision p : kPrecisions) {
    if (name == PrecisionName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("'%s' is not a precision: use fp32, bf16 or fp16", name));
}

int PrecisionBytes(Precision precision) {
  return precision == Precision::kFp32 ? 4 : 2;
}

absl::Status CheckHalfPrecision(Precision precision, const char* op) {
  if (precision == Precision::kBf16 || precision == Precision::kFp16) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s takes 16-bit arrays: pass Precision::kBf16 or kFp16, not %s", op,
      PrecisionName(precision)));
}

const char* RoundingName(Rounding rounding) {
  switch (rounding) {
    case Rounding::kNearestEven:
      return "nearest";
    case Rounding::kStochastic:
      return "stochastic";
  }
  return "?";
}

absl::StatusOr<Rounding> ParseRounding(std::string_view name) {
  for (Rounding r : kRoundings) {
    if (name == RoundingName(r)) return r;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "'%s' is not a rounding: use nearest or stochastic", name));
}

DType ParameterDType(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return DType::kBFloat16;
    case Precision::kFp16:
      return DType::kFloat16;
    case Precision::kFp32:
      break;
  }
  return DType::kFloat32;
}

absl::Status CheckRoundingNeedsHalf(Precision precision, Rounding rounding) {
  if (precision != Precision::kFp32 || rounding == Rounding::kNearestEven) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "--rounding=%s rounds to 16 bits: it needs --precision=bf16 or fp16",
      RoundingName(rounding)));
}

}  // namespace strata::train
