// output_path.h: checks that a report file can be written before the work
// that produces it starts, so that a long run never fails at its very end.
#ifndef STRATA_APPS_OUTPUT_PATH_H_
#define STRATA_APPS_OUTPUT_PATH_H_

#include <string>

#include "absl/status/status.h"

namespace strata {

// OK when `path` is empty, or a writable file, or a new name in a writable
// directory. InvalidArgument when it names a directory; an errno-based error
// (NotFound, PermissionDenied) otherwise, naming `flag`. Leaves nothing
// behind (a new file is created and removed at once to prove it can be).
absl::Status CheckWritable(const std::string& path, const std::string& flag);

}  // namespace strata

#endif  // STRATA_APPS_OUTPUT_PATH_H_
