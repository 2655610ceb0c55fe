// host_adam.cc: strata's host Adam (train/compute: AdamUpdateCpu, the
// update `strata train` runs on the host tier) for strata.torch's
// optimizers. One call updates one parameter's fp32 weight and moments in
// place, with the GIL released; the bias corrections are computed here in
// double from the step number, as the engine's optimizer computes them.
#include <nanobind/ndarray.h>

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "python/src/errors.h"
#include "python/src/py_bindings.h"
#include "train/compute/compute.h"

namespace nb = nanobind;

namespace strata::python {
namespace {

// C-contiguous fp32 CPU memory, taken as is (a converted copy would drop
// the update).
using Floats = nb::ndarray<float, nb::device::cpu, nb::c_contig>;

void AdamUpdate(Floats w, Floats m, Floats v, Floats g, double lr, double beta1,
                double beta2, double eps, int64_t step) {
  const size_t n = w.size();
  if (m.size() != n || v.size() != n || g.size() != n) {
    throw StatusError(absl::InvalidArgumentError(absl::StrFormat(
        "adam_update: weight, moments and gradient differ in size "
        "(%d, %d, %d, %d elements)",
        n, m.size(), v.size(), g.size())));
  }
  if (step < 1) {
    throw StatusError(
        absl::InvalidArgumentError("adam_update: step counts from 1"));
  }
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1)) {
    throw StatusError(
        absl::InvalidArgumentError("adam_update: betas must be in [0, 1)"));
  }
  train::AdamParams p;
  p.lr = static_cast<float>(lr);
  p.beta1 = static_cast<float>(beta1);
  p.beta2 = static_cast<float>(beta2);
  p.eps = static_cast<float>(eps);
  if (!(p.beta1 < 1.0f && p.beta2 < 1.0f)) {
    // 0.99999999 passes the check above in double and is 1 in float: the
    // bias correction would divide by zero.
    throw StatusError(absl::InvalidArgumentError(
        "adam_update: a beta rounds to 1 in float32"));
  }
  p.correction1 = static_cast<float>(
      1.0 / (1.0 - std::pow(static_cast<double>(p.beta1), double(step))));
  p.correction2 = static_cast<float>(
      1.0 / (1.0 - std::pow(static_cast<double>(p.beta2), double(step))));
  nb::gil_scoped_release released;
  train::AdamUpdateCpu(p, w.data(), m.data(), v.data(), g.data(),
                       static_cast<int64_t>(n));
}

}  // namespace

void BindHostAdam(nb::module_& m) {
  m.def("adam_update", &AdamUpdate, nb::arg("w").noconvert(),
        nb::arg("m").noconvert(), nb::arg("v").noconvert(),
        nb::arg("g").noconvert(), nb::arg("lr"), nb::arg("beta1"),
        nb::arg("beta2"), nb::arg("eps"), nb::arg("step"),
        "One Adam step (Kingma & Ba, 2015) in place on C-contiguous fp32 "
        "CPU arrays of one size: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; "
        "w -= lr (m c1) / (sqrt(v c2) + eps), c = 1/(1 - b^step), in float "
        "in that order (strata's host Adam, bit for bit).");
}

}  // namespace strata::python
