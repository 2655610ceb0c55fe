# StrataBuildInfo.cmake: run at build time (cmake -P) to write OUT from IN
# with the git commit of SRC, so `strata --version` names the commit it was
# built from, not the one CMake last configured. configure_file rewrites OUT
# only when its text changes, so an unchanged commit relinks nothing.
# Inputs: SRC, IN, OUT, VERSION, BUILD_TYPE, CUDA, IO_URING, MPI.
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR GIT_COMMIT STREQUAL "")
  set(GIT_COMMIT "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain
    --untracked-files=no OUTPUT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty STREQUAL "")
    string(APPEND GIT_COMMIT "-dirty")
  endif()
endif()
foreach(feature CUDA IO_URING MPI)
  if(${feature})
    set(${feature} true)
  else()
    set(${feature} false)
  endif()
endforeach()
configure_file("${IN}" "${OUT}" @ONLY)
