// store_open.h: opening a store with seams, for tests and tools that need to
// put a fault injector in front of the device or block-I/O layer.
#ifndef STRATA_SRC_STORE_OPEN_H_
#define STRATA_SRC_STORE_OPEN_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "strata/store.h"
#include "tiers/device/device_backend.h"
#include "tiers/nvme/nvme_tier.h"

namespace strata {

struct StoreSeams {
  // Wraps the device backend Open chose (e.g. in a FaultyDevice).
  std::function<std::unique_ptr<DeviceBackend>(std::unique_ptr<DeviceBackend>)>
      wrap_device;
  // Wraps the NVMe I/O engine (e.g. in a FaultyBlockIo).
  NvmeTier::BlockIoWrapper wrap_block_io;
};

// Store::Open with seams; Store::Open is OpenStore(options, {}).
absl::StatusOr<std::unique_ptr<Store>> OpenStore(const StoreOptions& options,
                                                 const StoreSeams& seams);

// Checks options for values that cannot work, with a message naming the
// option to change. Store::Open calls it first.
absl::Status ValidateStoreOptions(const StoreOptions& options);

}  // namespace strata

#endif  // STRATA_SRC_STORE_OPEN_H_
