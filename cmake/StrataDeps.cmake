# Third-party dependencies, all from Debian packages (scripts/setup.sh installs
# them). CUDA comes from the toolkit on the machine.
find_package(Threads REQUIRED)
find_package(absl REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing>=2.3)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# strata train: OpenBLAS for the CPU compute, zlib for the gzip'd IDX files.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
find_package(ZLIB REQUIRED)
# The language-model corpus: SentencePiece for the BPE tokenizer (the .pc
# file names both -lsentencepiece and -lsentencepiece_train).
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)

set(STRATA_HAVE_CUDA OFF)
if(NOT STRATA_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        # Hopper (H100/H200) natively, plus PTX for anything newer.
        set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
      endif()
      enable_language(CUDA)
      set(STRATA_HAVE_CUDA ON)
    endif()
  endif()
  if(STRATA_WITH_CUDA STREQUAL "ON" AND NOT STRATA_HAVE_CUDA)
    message(FATAL_ERROR "STRATA_WITH_CUDA=ON but no CUDA toolkit/nvcc was found")
  endif()
endif()
message(STATUS "strata: CUDA backend ${STRATA_HAVE_CUDA}")

# Sharded data-parallel training (`strata train --distributed`, under
# mpirun): Open MPI from Debian (libopenmpi-dev, openmpi-bin).
set(STRATA_HAVE_MPI OFF)
if(NOT STRATA_WITH_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS C)
  if(MPI_C_FOUND)
    set(STRATA_HAVE_MPI ON)
  elseif(STRATA_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "STRATA_WITH_MPI=ON but MPI was not found")
  endif()
endif()
message(STATUS "strata: MPI ${STRATA_HAVE_MPI}")
