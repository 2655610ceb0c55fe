// option_names.h: the option enums' names as flags, environment variables,
// reports and profiles spell them, and parsing them back. One table per enum
// (api/enum_names.cc), so a name is written once.
#ifndef STRATA_OPTION_NAMES_H_
#define STRATA_OPTION_NAMES_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "strata/options.h"

namespace strata {

std::string_view DeviceBackendName(
    DeviceBackendKind kind);                             // auto|cuda|simulated
std::string_view DeviceMemoryName(DeviceMemory memory);  // copies|unified
std::string_view IoEngineName(IoEngine engine);  // auto|io_uring|threads
std::string_view EvictionPolicyName(EvictionPolicy policy);  // belady|lru

// The value `text` names. InvalidArgument "<setting>=<text>: use a, b or c"
// when it names none; `setting` is where the text came from, as the user
// wrote it ("--device", "STRATA_DEVICE").
absl::StatusOr<DeviceBackendKind> ParseDeviceBackend(std::string_view text,
                                                     std::string_view setting);
absl::StatusOr<DeviceMemory> ParseDeviceMemory(std::string_view text,
                                               std::string_view setting);
absl::StatusOr<IoEngine> ParseIoEngine(std::string_view text,
                                       std::string_view setting);
absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(std::string_view text,
                                                   std::string_view setting);

}  // namespace strata

#endif  // STRATA_OPTION_NAMES_H_
