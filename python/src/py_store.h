// py_store.h: the store as Python sees it.
//
// A PyStore holds the store through a shared_ptr that every lease shares
// (py_lease.h), so close() makes this object unusable at once while the
// tiers are freed only when the last lease ends: memory a torch tensor
// still views is never unmapped under it.
#ifndef STRATA_PYTHON_SRC_PY_STORE_H_
#define STRATA_PYTHON_SRC_PY_STORE_H_

#include <nanobind/nanobind.h>

#include <memory>

#include "python/src/py_lease.h"
#include "strata/options.h"
#include "strata/store.h"

namespace strata::python {

class PyStore {
 public:
  // Opens a store (Store::Open's errors raise).
  explicit PyStore(const StoreOptions& options);

  // The store; FailedPrecondition after close().
  const std::shared_ptr<Store>& Get() const;
  // Drops this object's reference: later calls raise; leases still held
  // keep the tiers until they end.
  void Close() { store_.reset(); }
  bool closed() const { return store_ == nullptr; }
  const DeviceKind& device() const { return device_; }

 private:
  std::shared_ptr<Store> store_;
  DeviceKind device_;
};

// StoreOptions from Store(...)'s keyword arguments: sizes as ints (bytes)
// or strings ("4GiB"); InvalidArgument names an unknown keyword or a bad
// value.
StoreOptions OptionsFromKwargs(const nanobind::kwargs& kwargs);

}  // namespace strata::python

#endif  // STRATA_PYTHON_SRC_PY_STORE_H_
