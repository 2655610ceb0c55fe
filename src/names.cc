// names.cc: printable names of the public enums.
#include "strata/stats.h"
#include "strata/tensor.h"

namespace strata {

std::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kDevice:
      return "device";
    case Tier::kHost:
      return "host";
    case Tier::kNvme:
      return "nvme";
  }
  return "?";
}

std::string_view AccessName(Access access) {
  switch (access) {
    case Access::kRead:
      return "read";
    case Access::kWrite:
      return "write";
    case Access::kOverwrite:
      return "overwrite";
  }
  return "?";
}

std::string_view TensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::kParameter:
      return "parameter";
    case TensorKind::kGradient:
      return "gradient";
    case TensorKind::kOptimizerState:
      return "optimizer_state";
    case TensorKind::kActivation:
      return "activation";
    case TensorKind::kOther:
      return "other";
  }
  return "?";
}

uint64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return 1;
    case DType::kFloat32:
      return 4;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
  }
  return 1;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return "uint8";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
  }
  return "?";
}

std::string_view LinkName(Link link) {
  switch (link) {
    case Link::kH2D:
      return "h2d";
    case Link::kD2H:
      return "d2h";
    case Link::kNvmeRead:
      return "nvme_read";
    case Link::kNvmeWrite:
      return "nvme_write";
  }
  return "?";
}

}  // namespace strata
