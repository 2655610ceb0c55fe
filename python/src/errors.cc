// errors.cc: the exception classes and the StatusError translator.
#include "python/src/errors.h"

#include <Python.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "python/src/py_bindings.h"

namespace nb = nanobind;

namespace strata::python {
namespace {

// Owned by the module for the interpreter's life (never freed: Python keeps
// exception classes to the end).
PyObject* strata_error = nullptr;
PyObject* invalid_argument_error = nullptr;

// Raises `status` as the matching class, with .code and .message set.
void Raise(const absl::Status& status) {
  PyObject* type = status.code() == absl::StatusCode::kInvalidArgument
                       ? invalid_argument_error
                       : strata_error;
  const std::string code = absl::StatusCodeToString(status.code());
  const std::string message(status.message());
  PyObject* error = PyObject_CallFunction(
      type, "s", absl::StrCat(message, " [", code, "]").c_str());
  if (error == nullptr) return;  // the failure to build it is raised instead
  PyObject* code_text = PyUnicode_FromString(code.c_str());
  PyObject* message_text = PyUnicode_FromString(message.c_str());
  if (code_text && message_text &&
      PyObject_SetAttrString(error, "code", code_text) == 0 &&
      PyObject_SetAttrString(error, "message", message_text) == 0) {
    PyErr_SetObject(type, error);
  }
  Py_XDECREF(code_text);
  Py_XDECREF(message_text);
  Py_DECREF(error);
}

}  // namespace

void BindErrors(nb::module_& m) {
  strata_error = PyErr_NewExceptionWithDoc(
      "strata._core.StrataError",
      "A strata call failed. .code is the status code's name (NOT_FOUND, "
      "FAILED_PRECONDITION, RESOURCE_EXHAUSTED, DATA_LOSS, ...), .message "
      "the store's message.",
      PyExc_RuntimeError, nullptr);
  PyObject* bases = Py_BuildValue("(OO)", strata_error, PyExc_ValueError);
  invalid_argument_error = PyErr_NewExceptionWithDoc(
      "strata._core.InvalidArgumentError",
      "A bad argument (code INVALID_ARGUMENT); also a ValueError.", bases,
      nullptr);
  Py_XDECREF(bases);
  if (strata_error == nullptr || invalid_argument_error == nullptr) {
    throw nb::python_error();
  }
  m.attr("StrataError") = nb::borrow(strata_error);
  m.attr("InvalidArgumentError") = nb::borrow(invalid_argument_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      Raise(e.status());
    }
  });
}

}  // namespace strata::python
