// py_lease.h: a lease held from Python, and its export to torch through
// DLPack.
//
// A HeldLease owns the C++ Lease and a reference to its store, so the
// leased memory stays valid however the Python objects die: closing the
// Python Store drops the store only when no lease is left. `__dlpack__`
// moves the HeldLease into a DLManagedTensor (legacy "dltensor" capsule,
// DLPack 0.6, what torch 1.13 and 2.x take); the lease then ends in its
// deleter, when the consumer's last reference dies. The deleter is plain
// C++: it never takes the GIL and may run on any thread (each lease is
// released once, by its own deleter; Store calls are thread-safe).
//
// Memory kinds: a device-tier lease on a CUDA device is kDLCUDA; host-tier
// memory, and the simulated device's, is kDLCPU (torch refuses
// kDLCUDAHost for pinned memory). DLPack 0.6 has no read-only flag: a
// tensor made from a kRead lease must not be written (its lower copies
// would silently differ).
#ifndef STRATA_PYTHON_SRC_PY_LEASE_H_
#define STRATA_PYTHON_SRC_PY_LEASE_H_

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "strata/lease.h"
#include "strata/store.h"
#include "strata/tensor.h"

namespace strata::python {

// Where a device-tier lease's memory is: a CUDA ordinal, or the simulated
// device (host memory).
struct DeviceKind {
  bool cuda = false;
  int ordinal = 0;
};

struct HeldLease {
  Lease lease;
  std::shared_ptr<Store> store;  // keeps data() valid
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;  // the elements; row-major, compact
  void* stream = nullptr;      // the acquire's stream: Release orders on it
  DeviceKind device;
};

class PyLease {
 public:
  explicit PyLease(std::unique_ptr<HeldLease> held) : held_(std::move(held)) {}
  PyLease(PyLease&&) = default;
  PyLease& operator=(PyLease&&) = default;
  ~PyLease();  // releases a lease still held, dropping its error

  // The lease, or FailedPrecondition naming why there is none.
  const HeldLease& Held() const;
  bool held() const { return held_ != nullptr; }
  bool exported() const { return exported_; }

  // Ends the lease. FailedPrecondition when already released or exported
  // (its tensor's deleter releases it).
  void Release();

  // The DLPack capsule of the leased memory; the lease moves into it.
  // `stream` follows the DLPack protocol (None: no ordering; 1: the legacy
  // default stream; a cudaStream_t otherwise); on a CUDA lease it must be
  // the stream the lease was acquired on (InvalidArgument otherwise).
  nanobind::object DLPack(std::optional<uintptr_t> stream);
  // (device type, ordinal) as DLPack's __dlpack_device__.
  std::pair<int, int> DLPackDevice() const;

 private:
  std::unique_ptr<HeldLease> held_;
  bool exported_ = false;
};

// Leases whose Release failed inside a DLPack deleter (where no exception
// can go): a count for tests and reports, normally 0.
uint64_t DeleterReleaseFailures();

}  // namespace strata::python

#endif  // STRATA_PYTHON_SRC_PY_LEASE_H_
