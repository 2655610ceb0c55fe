// build_info.h: what this binary is and what it was built with, for
// `strata --version` (written at build time from apps/build_info.cc.in).
#ifndef STRATA_APPS_BUILD_INFO_H_
#define STRATA_APPS_BUILD_INFO_H_

namespace strata {

struct BuildInfo {
  const char* version;     // the project version, "0.1.0"
  const char* commit;      // git commit, "-dirty" when built with changes
  const char* build_type;  // CMAKE_BUILD_TYPE
  bool cuda;               // the CUDA device backend is built in
  bool io_uring;           // the NVMe tier's io_uring engine is built in
  bool mpi;                // sharding over MPI is built in
};

const BuildInfo& GetBuildInfo();

}  // namespace strata

#endif  // STRATA_APPS_BUILD_INFO_H_
