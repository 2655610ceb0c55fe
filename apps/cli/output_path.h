// output_path.h: checks that a report file can be written before the work
// that produces it starts, so that a long run never fails at its very end.
#ifndef STRATA_APPS_CLI_OUTPUT_PATH_H_
#define STRATA_APPS_CLI_OUTPUT_PATH_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace strata {

// OK when `path` is empty, or a writable file, or a new name in a writable
// directory. InvalidArgument when it names a directory; an errno-based error
// (NotFound, PermissionDenied) otherwise, naming `flag`. Leaves nothing
// behind (a new file is created and removed at once to prove it can be).
absl::Status CheckWritable(const std::string& path, const std::string& flag);

// A file flag's value and the flag ("--json"). Empty values are unset.
struct FileFlag {
  std::string path;
  std::string flag;
};

// OK when no two `outputs` name one file and no output names one of
// `inputs` (compared as absolute, normalised paths, links resolved where
// they exist). InvalidArgument naming both flags otherwise: a run would
// write one output over another, or over what it reads.
absl::Status CheckDistinctFiles(const std::vector<FileFlag>& outputs,
                                const std::vector<FileFlag>& inputs = {});

}  // namespace strata

#endif  // STRATA_APPS_CLI_OUTPUT_PATH_H_
