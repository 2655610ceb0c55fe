// errors.h: strata's absl::Status as Python exceptions.
//
// Every failed call raises strata.StrataError (a RuntimeError) carrying the
// store's message and its code as a string (`err.code == "NOT_FOUND"`);
// InvalidArgument raises strata.InvalidArgumentError, which is also a
// ValueError, so bad arguments read as Python users expect. C++ code of the
// extension throws StatusError; a translator registered at import turns it
// into the exception, so no C++ exception crosses into the interpreter.
#ifndef STRATA_PYTHON_SRC_ERRORS_H_
#define STRATA_PYTHON_SRC_ERRORS_H_

#include <nanobind/nanobind.h>

#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata::python {

// A non-OK status on its way to Python.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status)
      : status_(std::move(status)), text_(status_.ToString()) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return text_.c_str(); }

 private:
  absl::Status status_;
  std::string text_;
};

// Throws StatusError unless `status` is OK.
inline void ThrowIfError(absl::Status status) {
  if (!status.ok()) throw StatusError(std::move(status));
}

// The value, or throws StatusError.
template <typename T>
T ValueOrThrow(absl::StatusOr<T> result) {
  if (!result.ok()) throw StatusError(std::move(result).status());
  return *std::move(result);
}

}  // namespace strata::python

#endif  // STRATA_PYTHON_SRC_ERRORS_H_
