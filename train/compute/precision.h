// precision.h: the number formats a training run keeps its parameters and
// gradients in (--precision), and how values are rounded into the 16-bit
// ones (--rounding). The conversions themselves are in half.h; the casts
// over arrays on a Compute in compute.h.
//
// A 16-bit tensor is an array of uint16_t holding bf16 (bfloat16: float's
// sign and 8 exponent bits, 7 mantissa bits) or fp16 (IEEE 754 binary16:
// 5 exponent bits, 10 mantissa bits) bit patterns; which one is the
// caller's Precision, never stored with the data.
#ifndef STRATA_TRAIN_COMPUTE_PRECISION_H_
#define STRATA_TRAIN_COMPUTE_PRECISION_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/tensor.h"  // DType

namespace strata::train {

enum class Precision : uint8_t {
  kFp32,  // everything float32 (the default)
  kBf16,  // bf16 parameters and gradients, fp32 master weights and moments
  kFp16,  // fp16 likewise, with dynamic loss scaling (loss_scale.h)
};

// "fp32", "bf16" or "fp16" (the --precision values).
const char* PrecisionName(Precision precision);

// The precision `name` spells (PrecisionName's names); InvalidArgument
// listing them otherwise.
absl::StatusOr<Precision> ParsePrecision(std::string_view name);

// Bytes per element of a parameter or gradient: 4 for fp32, 2 for 16-bit.
int PrecisionBytes(Precision precision);

// The store dtype of a parameter or gradient in `precision`.
DType ParameterDType(Precision precision);

// OK for kBf16 and kFp16; InvalidArgument naming `op` for kFp32 (or a value
// outside the enum), for operations that take 16-bit arrays.
absl::Status CheckHalfPrecision(Precision precision, const char* op);

// How a float becomes a 16-bit value.
enum class Rounding : uint8_t {
  kNearestEven,  // IEEE round to nearest, ties to even (the default)
  // Round up with probability (x - down) / (up - down), so the result's
  // expectation is x (Gupta et al., "Deep learning with limited numerical
  // precision", ICML 2015): small updates to 16-bit weights are not lost.
  kStochastic,
};

// "nearest" or "stochastic" (the --rounding values).
const char* RoundingName(Rounding rounding);
// The rounding `name` spells; InvalidArgument listing the names otherwise.
absl::StatusOr<Rounding> ParseRounding(std::string_view name);

// InvalidArgument naming --rounding when `rounding` is not nearest even and
// `precision` is fp32 (nothing rounds to 16 bits).
absl::Status CheckRoundingNeedsHalf(Precision precision, Rounding rounding);

// A rounding and, for kStochastic, where its random bits come from. Element
// i of a cast draws its bits from (seed, first_index + i) alone
// (StochasticBits in half.h), so a cast gives the same bits however it is
// split over threads, chunks or devices. A tensor cast in pieces passes
// each piece's offset as first_index to get the bits of a whole cast.
struct RoundingMode {
  Rounding rounding = Rounding::kNearestEven;
  // Per tensor and per step (StochasticSeed in half.h); ignored for
  // kNearestEven. Default: 0.
  uint64_t seed = 0;
  // Index of the first element within its tensor. Default: 0.
  int64_t first_index = 0;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_PRECISION_H_
