// system_info.h: facts about the machine strata runs on, read from the OS.
#ifndef STRATA_BASE_SYSTEM_INFO_H_
#define STRATA_BASE_SYSTEM_INFO_H_

#include <cstdint>

namespace strata {

// Physical memory of this machine in bytes (sysconf), 0 if unknown.
uint64_t PhysicalMemoryBytes();

}  // namespace strata

#endif  // STRATA_BASE_SYSTEM_INFO_H_
