// tensor.h: what a store tensor is — its id, spec, kind, dtype — and the
// tiers and access modes a lease names.
#ifndef STRATA_TENSOR_H_
#define STRATA_TENSOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// The three tiers, fastest first. A tier's index is its depth: a "lower" tier
// is slower and larger.
enum class Tier : uint8_t { kDevice = 0, kHost = 1, kNvme = 2 };
inline constexpr int kNumTiers = 3;
std::string_view TierName(Tier tier);  // "device", "host", "nvme"

// What a lease may do with the bytes.
enum class Access : uint8_t {
  kRead,   // read only; the tensor must have contents (else FailedPrecondition)
  kWrite,  // read-modify-write; a tensor with no contents presents zeros
  kOverwrite,  // contents undefined at acquire; nothing is loaded
};
std::string_view AccessName(Access access);

// What the tensor holds in a training job. Metadata for reports and for the
// scheduler's policies; it does not change how bytes move.
enum class TensorKind : uint8_t {
  kParameter,
  kGradient,
  kOptimizerState,
  kActivation,
  kOther,
};
std::string_view TensorKindName(TensorKind kind);

enum class DType : uint8_t {
  kUInt8,
  kFloat32,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
};
// Bytes per element: 1, 4, 2, 2, 4, 8.
uint64_t DTypeSize(DType dtype);
std::string_view DTypeName(DType dtype);

// A store-wide tensor handle. Ids are stable and never reused by one store.
struct TensorId {
  uint64_t value = 0;
  friend bool operator==(TensorId a, TensorId b) { return a.value == b.value; }
  template <typename H>
  friend H AbslHashValue(H h, TensorId id) {
    return H::combine(std::move(h), id.value);
  }
};

// Everything Store::Create needs to know about a tensor.
struct TensorSpec {
  // For messages and reports; need not be unique. Default: "".
  std::string name{};
  // Logical size in bytes; any value >= 1 (odd sizes round-trip exactly).
  uint64_t size_bytes = 0;
  // Element type and shape are metadata. If `shape` is non-empty, the product
  // of its extents times DTypeSize(dtype) must equal size_bytes.
  // Default: kUInt8, no shape.
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape{};
  // Default: kOther.
  TensorKind kind = TensorKind::kOther;
  // The tier where the tensor's space is always reserved; faster tiers hold
  // cache copies. kDevice pins it on the device. Default: kNvme.
  Tier home = Tier::kNvme;
};

}  // namespace strata

#endif  // STRATA_TENSOR_H_
