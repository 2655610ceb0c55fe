# layering_check.cmake: proves that the build enforces the layers
# (cmake/StrataLayers.cmake). Each case is an EXCLUDE_FROM_ALL object library
# compiled with one layer's includes (tests/layering/CMakeLists.txt); a case
# that includes against the data flow must fail with the header not found, and
# each control case (a downward include) must build.
# Run by ctest as: cmake -DBUILD_DIR=<build dir> -DCASES=<target:header;...>
#   -DCONTROLS=<target;...> -P layering_check.cmake
foreach(entry ${CASES})
  string(REPLACE ":" ";" parts "${entry}")
  list(GET parts 0 target)
  list(GET parts 1 header)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${target}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${target}: including ${header} built; the layers are not enforced")
  endif()
  # gcc: "<header>: No such file or directory"; clang: "'<header>' file not
  # found".
  string(FIND "${out}" "${header}: No such file or directory" gcc_found)
  string(FIND "${out}" "'${header}' file not found" clang_found)
  if(gcc_found EQUAL -1 AND clang_found EQUAL -1)
    message(FATAL_ERROR "${target} failed, but not for want of ${header}:\n${out}")
  endif()
  message(STATUS "${target}: ${header} not found, as it must be")
endforeach()
foreach(control ${CONTROLS})
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${control}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "control ${control} (a downward include) failed:\n${out}")
  endif()
  message(STATUS "${control}: the downward include builds")
endforeach()
