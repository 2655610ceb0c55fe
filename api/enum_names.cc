// enum_names.cc: the public enums' names. It lives in the lowest layer so
// that every layer (a tier reading STRATA_IO_ENGINE, the store writing a
// report, the command line parsing a flag) shares one table per enum.
#include <string>
#include <utility>

#include "strata/option_names.h"
#include "strata/stats.h"
#include "strata/tensor.h"

namespace strata {
namespace {

template <typename E>
using NameTable = std::pair<E, std::string_view>[];

constexpr NameTable<DeviceBackendKind> kDeviceBackends = {
    {DeviceBackendKind::kAuto, "auto"},
    {DeviceBackendKind::kCuda, "cuda"},
    {DeviceBackendKind::kSimulated, "simulated"}};
constexpr NameTable<DeviceMemory> kDeviceMemories = {
    {DeviceMemory::kExplicitCopies, "copies"},
    {DeviceMemory::kUnified, "unified"}};
constexpr NameTable<IoEngine> kIoEngines = {{IoEngine::kAuto, "auto"},
                                            {IoEngine::kIoUring, "io_uring"},
                                            {IoEngine::kThreadPool, "threads"}};
constexpr NameTable<EvictionPolicy> kEvictionPolicies = {
    {EvictionPolicy::kBelady, "belady"}, {EvictionPolicy::kLru, "lru"}};

template <typename E, size_t N>
std::string_view NameIn(const std::pair<E, std::string_view> (&table)[N],
                        E value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "?";
}

template <typename E, size_t N>
absl::StatusOr<E> ParseIn(const std::pair<E, std::string_view> (&table)[N],
                          std::string_view text, std::string_view setting) {
  for (const auto& [v, name] : table) {
    if (name == text) return v;
  }
  std::string message =
      std::string(setting) + "=" + std::string(text) + ": use ";
  for (size_t i = 0; i < N; ++i) {
    message += i == 0 ? "" : i + 1 == N ? " or " : ", ";
    message += table[i].second;
  }
  return absl::InvalidArgumentError(message);
}

}  // namespace

std::string_view DeviceBackendName(DeviceBackendKind kind) {
  return NameIn(kDeviceBackends, kind);
}
std::string_view DeviceMemoryName(DeviceMemory memory) {
  return NameIn(kDeviceMemories, memory);
}
std::string_view IoEngineName(IoEngine engine) {
  return NameIn(kIoEngines, engine);
}
std::string_view EvictionPolicyName(EvictionPolicy policy) {
  return NameIn(kEvictionPolicies, policy);
}

absl::StatusOr<DeviceBackendKind> ParseDeviceBackend(std::string_view text,
                                                     std::string_view setting) {
  return ParseIn(kDeviceBackends, text, setting);
}
absl::StatusOr<DeviceMemory> ParseDeviceMemory(std::string_view text,
                                               std::string_view setting) {
  return ParseIn(kDeviceMemories, text, setting);
}
absl::StatusOr<IoEngine> ParseIoEngine(std::string_view text,
                                       std::string_view setting) {
  return ParseIn(kIoEngines, text, setting);
}
absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(std::string_view text,
                                                   std::string_view setting) {
  return ParseIn(kEvictionPolicies, text, setting);
}

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
