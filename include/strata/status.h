// status.h: the two error-propagation macros strata uses with absl::Status.
//
// Debian's Abseil (20220623) predates absl's own status macros, so strata
// defines its own:
//   STRATA_RETURN_IF_ERROR(expr)      returns the Status if `expr` is not OK.
//   STRATA_ASSIGN_OR_RETURN(lhs, expr) evaluates a StatusOr<T>, returns its
//                                      Status on error, else assigns the value.
#ifndef STRATA_STATUS_H_
#define STRATA_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define STRATA_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status strata_status_ = (expr);          \
    if (!strata_status_.ok()) return strata_status_; \
  } while (0)

#define STRATA_STATUS_CONCAT_INNER_(a, b) a##b
#define STRATA_STATUS_CONCAT_(a, b) STRATA_STATUS_CONCAT_INNER_(a, b)

#define STRATA_ASSIGN_OR_RETURN(lhs, expr) \
  STRATA_ASSIGN_OR_RETURN_IMPL_(           \
      STRATA_STATUS_CONCAT_(strata_statusor_, __LINE__), lhs, expr)

#define STRATA_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // STRATA_STATUS_H_
