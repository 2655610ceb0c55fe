// module.cc: strata._core, the nanobind extension over the public store API
// (include/strata). The strata package (python/strata) re-exports it;
// strata.torch builds on it.
#include <nanobind/nanobind.h>

#include "python/src/py_bindings.h"
#include "strata/tensor.h"

namespace nb = nanobind;

namespace strata::python {
namespace {

void BindEnums(nb::module_& m) {
  nb::enum_<Tier>(m, "Tier", "The tiers, fastest first.")
      .value("DEVICE", Tier::kDevice)
      .value("HOST", Tier::kHost)
      .value("NVME", Tier::kNvme);
  nb::enum_<Access>(m, "Access",
                    "READ: the tensor must have contents; WRITE: "
                    "read-modify-write (no contents: zeros); OVERWRITE: "
                    "nothing is loaded.")
      .value("READ", Access::kRead)
      .value("WRITE", Access::kWrite)
      .value("OVERWRITE", Access::kOverwrite);
  nb::enum_<TensorKind>(m, "Kind",
                        "What a tensor holds (for the scheduler "
                        "and reports).")
      .value("PARAMETER", TensorKind::kParameter)
      .value("GRADIENT", TensorKind::kGradient)
      .value("OPTIMIZER_STATE", TensorKind::kOptimizerState)
      .value("ACTIVATION", TensorKind::kActivation)
      .value("OTHER", TensorKind::kOther);
  nb::enum_<DType>(m, "DType")
      .value("UINT8", DType::kUInt8)
      .value("FLOAT32", DType::kFloat32)
      .value("FLOAT16", DType::kFloat16)
      .value("BFLOAT16", DType::kBFloat16)
      .value("INT32", DType::kInt32)
      .value("INT64", DType::kInt64);
}

}  // namespace
}  // namespace strata::python

NB_MODULE(_core, m) {
  m.doc() = "strata's tiered tensor store (the C++ API through nanobind)";
  // Objects that a traceback or a module global holds at interpreter exit
  // are not freed by Python; nanobind would report them as leaks.
  nb::set_leak_warnings(false);
  strata::python::BindErrors(m);
  strata::python::BindEnums(m);
  strata::python::BindLease(m);
  strata::python::BindStore(m);
  strata::python::BindHostAdam(m);
}
