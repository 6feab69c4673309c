// Early-return helpers for absl::Status and absl::StatusOr<T>.
//
// Thread-safe: they are macros over local values.
//
//   RETURN_IF_ERROR(Validate(request));
//   ASSIGN_OR_RETURN(auto job, MakeJob(request));
#ifndef GEMM_COMMON_STATUS_MACROS_H_
#define GEMM_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GEMM_STATUS_CONCAT_INNER_(a, b) a##b
#define GEMM_STATUS_CONCAT_(a, b) GEMM_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function unless it is OK.
#define RETURN_IF_ERROR(expr)               \
  do {                                      \
    const ::absl::Status _status_ = (expr); \
    if (!_status_.ok()) return _status_;    \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); returns its status on error,
// otherwise moves its value into `lhs`.
#define ASSIGN_OR_RETURN(lhs, rexpr)                                          \
  GEMM_ASSIGN_OR_RETURN_IMPL_(GEMM_STATUS_CONCAT_(_statusor_, __LINE__), lhs, \
                              rexpr)

#define GEMM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                \
  if (!statusor.ok()) return statusor.status();           \
  lhs = std::move(statusor).value()

#endif  // GEMM_COMMON_STATUS_MACROS_H_
