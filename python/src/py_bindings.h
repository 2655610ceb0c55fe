// py_bindings.h: the parts of strata._core, each bound by its own file.
#ifndef STRATA_PYTHON_SRC_PY_BINDINGS_H_
#define STRATA_PYTHON_SRC_PY_BINDINGS_H_

#include <nanobind/nanobind.h>

namespace strata::python {

void BindErrors(nanobind::module_& m);    // errors.cc
void BindLease(nanobind::module_& m);     // py_lease.cc
void BindStore(nanobind::module_& m);     // py_store.cc
void BindHostAdam(nanobind::module_& m);  // host_adam.cc

}  // namespace strata::python

#endif  // STRATA_PYTHON_SRC_PY_BINDINGS_H_
