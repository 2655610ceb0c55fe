// profile.h: MachineProfile — what `strata bench --profile=FILE` measured on
// a machine (link bandwidth per direction and size, the best NVMe request size
// and queue depth), saved as JSON, and how StoreOptions takes its defaults
// from it. The idea is DeepSpeed's ds_nvme_tune, done in seconds and kept in
// a file the store reads.
#ifndef STRATA_PROFILE_H_
#define STRATA_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/options.h"

namespace strata {

// Bandwidth of one copy size on one link.
struct LinkPoint {
  uint64_t bytes = 0;  // bytes per copy
  double gbps = 0;     // GB/s (1e9 bytes per second), median of the samples
};

struct MachineProfile {
  std::string device;          // "cuda:<name>" or "simulated"
  std::vector<LinkPoint> h2d;  // pinned host -> device, ascending sizes
  std::vector<LinkPoint> d2h;  // device -> pinned host
  // The sequential NVMe setting with the highest min(read, write) bandwidth
  // in the sweep; 0 when the sweep did not run.
  uint64_t nvme_block_size_bytes = 0;
  uint32_t nvme_queue_depth = 0;
  double nvme_read_gbps = 0;  // at that setting
  double nvme_write_gbps = 0;
  std::string nvme_directory;  // where it was measured
};

// Writes `profile` as JSON to `path`. An errno-based error naming the path
// when it cannot be written.
absl::Status SaveMachineProfile(const MachineProfile& profile,
                                const std::string& path);

// Reads a profile SaveMachineProfile wrote. NotFound for a missing file;
// InvalidArgument naming the field for malformed JSON, a wrong format version
// or nonsense values (a block size that is not a multiple of 4096, a queue
// depth of 0 or above 4096, negative bandwidth).
absl::StatusOr<MachineProfile> LoadMachineProfile(const std::string& path);

// Sets options->nvme.block_size_bytes and queue_depth from the profile when
// it measured them; leaves every other field alone.
void ApplyMachineProfile(const MachineProfile& profile, StoreOptions* options);

}  // namespace strata

#endif  // STRATA_PROFILE_H_
