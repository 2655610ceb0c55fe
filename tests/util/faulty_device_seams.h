// faulty_device_seams.h: store seams that wrap the store's device in a
// FaultyDevice, for tests that hold its copies and events at the gate or
// inject copy faults.
#ifndef STRATA_TESTS_UTIL_FAULTY_DEVICE_SEAMS_H_
#define STRATA_TESTS_UTIL_FAULTY_DEVICE_SEAMS_H_

#include <memory>
#include <utility>

#include "src/store_open.h"
#include "tiers/fault/faulty_device.h"

namespace strata::testing {

// Seams for OpenStore whose device is a FaultyDevice around the one the
// store opens; `*device` points to it once the store is open (it lives as
// long as the store).
inline StoreSeams FaultyDeviceSeams(FaultyDevice** device) {
  StoreSeams seams;
  seams.wrap_device = [device](std::unique_ptr<DeviceBackend> inner) {
    auto faulty = std::make_unique<FaultyDevice>(std::move(inner));
    *device = faulty.get();
    return faulty;
  };
  return seams;
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_UTIL_FAULTY_DEVICE_SEAMS_H_
