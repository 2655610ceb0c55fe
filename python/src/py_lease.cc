// py_lease.cc: PyLease and the DLPack export (see py_lease.h).
#include "python/src/py_lease.h"

#include <Python.h>
#include <dlpack/dlpack.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "python/src/errors.h"
#include "python/src/py_bindings.h"

namespace nb = nanobind;

namespace strata::python {
namespace {

std::atomic<uint64_t> deleter_release_failures{0};

constexpr const char* kCapsuleName = "dltensor";
// DLPack's stream 1: the legacy default stream (cudaStreamLegacy), which
// the store's null stream also means.
constexpr uintptr_t kLegacyStream = 1;

DLDataType ToDLPack(DType dtype) {
  const uint8_t bits = static_cast<uint8_t>(DTypeSize(dtype) * 8);
  switch (dtype) {
    case DType::kUInt8:
      return {kDLUInt, bits, 1};
    case DType::kFloat32:
    case DType::kFloat16:
      return {kDLFloat, bits, 1};
    case DType::kBFloat16:
      return {kDLBfloat, bits, 1};
    case DType::kInt32:
    case DType::kInt64:
      return {kDLInt, bits, 1};
  }
  return {kDLUInt, 8, 1};
}

// The exported lease: the DLManagedTensor first, so a pointer to it is a
// pointer to the whole.
struct ExportedLease {
  DLManagedTensor managed{};
  std::unique_ptr<HeldLease> held;
};

// The consumer's deleter: ends the lease. No Python here (no GIL needed);
// runs once, on whatever thread drops the last reference.
void DeleteExported(DLManagedTensor* managed) {
  auto* exported = static_cast<ExportedLease*>(managed->manager_ctx);
  if (exported->held->lease.valid() &&
      !exported->held->lease.Release(exported->held->stream).ok()) {
    deleter_release_failures.fetch_add(1, std::memory_order_relaxed);
  }
  delete exported;
}

// A capsule no consumer took ends its lease when it dies.
void DestroyCapsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;  // consumed
  auto* managed = static_cast<DLManagedTensor*>(
      PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed != nullptr && managed->deleter != nullptr) {
    managed->deleter(managed);
  }
}

absl::Status NoLease(bool exported) {
  return absl::FailedPreconditionError(
      exported ? "the lease was handed to a tensor (DLPack); it ends when "
                 "that tensor's last reference dies"
               : "the lease was released");
}

// Takes `capsule` as a consumer does (renamed "used_dltensor") and runs its
// deleter on a native thread, joined while the caller holds the GIL.
void DeleteOnNativeThread(nb::handle capsule) {
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) {
    throw StatusError(absl::InvalidArgumentError(
        "expected an unconsumed DLPack capsule (Lease.__dlpack__())"));
  }
  auto* managed = static_cast<DLManagedTensor*>(
      PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  if (PyCapsule_SetName(capsule.ptr(), "used_dltensor") != 0) {
    throw nb::python_error();
  }
  std::thread([managed] { managed->deleter(managed); }).join();
}

}  // namespace

uint64_t DeleterReleaseFailures() {
  return deleter_release_failures.load(std::memory_order_relaxed);
}

PyLease::~PyLease() {
  if (held_ != nullptr) held_->lease.Release(held_->stream).IgnoreError();
}

const HeldLease& PyLease::Held() const {
  if (held_ == nullptr) throw StatusError(NoLease(exported_));
  return *held_;
}

void PyLease::Release() {
  if (held_ == nullptr) throw StatusError(NoLease(exported_));
  std::unique_ptr<HeldLease> held = std::move(held_);
  ThrowIfError(held->lease.Release(held->stream));
}

std::pair<int, int> PyLease::DLPackDevice() const {
  const HeldLease& held = Held();
  if (held.lease.tier() == Tier::kDevice && held.device.cuda) {
    return {kDLCUDA, held.device.ordinal};
  }
  return {kDLCPU, 0};
}

nb::object PyLease::DLPack(std::optional<uintptr_t> stream) {
  const HeldLease& held = Held();
  const bool cuda = DLPackDevice().first == kDLCUDA;
  if (cuda && stream.has_value()) {
    const uintptr_t acquired = reinterpret_cast<uintptr_t>(held.stream);
    const bool same =
        *stream == acquired || (acquired == 0 && *stream == kLegacyStream);
    if (!same) {
      throw StatusError(absl::InvalidArgumentError(absl::StrFormat(
          "the lease was acquired on stream 0x%x and is asked for on stream "
          "0x%x: acquire it on the consumer's stream",
          acquired, *stream)));
    }
  }
  auto exported = std::make_unique<ExportedLease>();
  exported->held = std::move(held_);
  exported_ = true;
  HeldLease& h = *exported->held;
  DLTensor& t = exported->managed.dl_tensor;
  t.data = h.lease.data();
  t.device = cuda ? DLDevice{kDLCUDA, h.device.ordinal} : DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int>(h.shape.size());
  t.dtype = ToDLPack(h.dtype);
  t.shape = h.shape.data();
  t.strides = nullptr;  // compact, row-major
  t.byte_offset = 0;
  exported->managed.manager_ctx = exported.get();
  exported->managed.deleter = DeleteExported;
  PyObject* capsule =
      PyCapsule_New(&exported->managed, kCapsuleName, DestroyCapsule);
  if (capsule == nullptr) {
    // Nothing took it: give the lease back to this object.
    held_ = std::move(exported->held);
    exported_ = false;
    throw nb::python_error();
  }
  exported.release();  // the capsule owns it now
  return nb::steal(capsule);
}

void BindLease(nb::module_& m) {
  nb::class_<PyLease>(
      m, "Lease",
      "A tensor pinned on one tier until released: Store.acquire returns "
      "it. torch.from_dlpack(lease) views its memory zero-copy; the lease "
      "then ends when that tensor's last reference dies. As a context "
      "manager it is released on exit (unless handed to a tensor).")
      .def_prop_ro("id",
                   [](const PyLease& l) { return l.Held().lease.id().value; })
      .def_prop_ro("tier",
                   [](const PyLease& l) { return l.Held().lease.tier(); })
      .def_prop_ro("access",
                   [](const PyLease& l) { return l.Held().lease.access(); })
      .def_prop_ro("size_bytes",
                   [](const PyLease& l) { return l.Held().lease.size_bytes(); })
      .def_prop_ro("dtype", [](const PyLease& l) { return l.Held().dtype; })
      .def_prop_ro("shape", [](const PyLease& l) { return l.Held().shape; })
      .def_prop_ro("held", &PyLease::held,
                   "True until released or handed to a tensor.")
      .def_prop_ro("exported", &PyLease::exported,
                   "True once handed to a tensor through DLPack.")
      .def("release", &PyLease::Release,
           "Ends the lease. Raises FAILED_PRECONDITION when it was already "
           "released or handed to a tensor.")
      .def(
          "__dlpack__",
          [](PyLease& l, nb::object stream, nb::object, nb::object,
             nb::object copy) {
            bool copy_asked = false;
            if (!copy.is_none() && nb::try_cast<bool>(copy, copy_asked) &&
                copy_asked) {
              // The protocol lets a producer refuse what it cannot do.
              throw StatusError(absl::InvalidArgumentError(
                  "__dlpack__(copy=True): a lease is viewed, never copied"));
            }
            std::optional<uintptr_t> s;
            int64_t value = 0;
            if (!stream.is_none()) {
              if (!nb::try_cast<int64_t>(stream, value) || value < -1) {
                throw StatusError(absl::InvalidArgumentError(
                    "__dlpack__: stream must be None, -1 or a stream handle"));
              }
              // -1: the consumer asks for no synchronization.
              if (value != -1) s = static_cast<uintptr_t>(value);
            }
            return l.DLPack(s);
          },
          nb::kw_only(), nb::arg("stream").none() = nb::none(),
          nb::arg("max_version").none() = nb::none(),
          nb::arg("dl_device").none() = nb::none(),
          nb::arg("copy").none() = nb::none(),
          "The DLPack capsule (legacy, DLPack 0.6) of the leased memory; "
          "the lease moves into it.")
      .def("__dlpack_device__", &PyLease::DLPackDevice)
      .def(
          "__enter__", [](PyLease& l) -> PyLease& { return l; },
          nb::rv_policy::reference)
      .def(
          "__exit__",
          [](PyLease& l, nb::object, nb::object, nb::object) {
            if (l.held()) l.Release();
          },
          nb::arg().none(), nb::arg().none(), nb::arg().none())
      .def("__repr__", [](const PyLease& l) {
        if (!l.held()) {
          return std::string(l.exported() ? "<strata.Lease handed to a tensor>"
                                          : "<strata.Lease released>");
        }
        const HeldLease& h = l.Held();
        return absl::StrFormat("<strata.Lease tensor %d on %s, %s, %d bytes>",
                               h.lease.id().value, TierName(h.lease.tier()),
                               AccessName(h.lease.access()),
                               h.lease.size_bytes());
      });
  m.def("_deleter_release_failures", &DeleterReleaseFailures,
        "Leases whose release failed in a DLPack deleter (for tests).");
  m.def("_delete_on_native_thread", &DeleteOnNativeThread, nb::arg("capsule"),
        "Test seam: consumes an unconsumed DLPack capsule as a consumer "
        "would and runs its deleter on a new native thread while this one "
        "keeps the GIL (a deleter that took the GIL would deadlock).");
}

}  // namespace strata::python
