// fault_env.h: the test-only switch that injects block-I/O faults into a
// whole process (a real `strata train` run) without a code seam: the
// environment variable STRATA_TEST_BLOCK_IO_FAULTS holds a FaultSpec as text,
// and Store::Open puts a FaultyBlockIo with it in front of the NVMe engine
// (below the retries, so the store sees what a flaky disk would show it).
//
// The text is comma-separated key=value pairs, every key optional:
//   seed=N  rate=P (0..1)  nth=N  from=N
//   ops=all|reads|writes
//   kind=eio|enospc|short-read|short-write|bit-flip
// e.g. "seed=7,rate=0.02,nth=3,ops=reads". Not advertised to users: it
// exists so tests can prove end to end that training survives faults.
#ifndef STRATA_TIERS_FAULT_FAULT_ENV_H_
#define STRATA_TIERS_FAULT_FAULT_ENV_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tiers/fault/fault_spec.h"

namespace strata {

inline constexpr char kBlockIoFaultsEnv[] = "STRATA_TEST_BLOCK_IO_FAULTS";

// Parses `text` as above. InvalidArgument naming the variable and the pair
// it could not read.
absl::StatusOr<FaultSpec> ParseFaultSpec(absl::string_view text);

// The spec in STRATA_TEST_BLOCK_IO_FAULTS, or nullopt when it is unset or
// empty; ParseFaultSpec's errors.
absl::StatusOr<std::optional<FaultSpec>> BlockIoFaultsFromEnv();

}  // namespace strata

#endif  // STRATA_TIERS_FAULT_FAULT_ENV_H_
