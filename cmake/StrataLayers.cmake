# Layers as targets. Sources include each other by their path from the
# project root ("tiers/nvme/nvme_tier.h"), but no target sees the root:
# strata_layer() gives a target an include view (a folder in the build tree
# holding one symlink, to the layer's own source folder) and targets see the
# views of what they link. Data flows down (DESIGN.md: apps -> train -> store
# -> scheduler and tiers -> base), so an include against the flow names a
# folder that is not on the compiler's path and fails to build.
# tests/layering_test.cmake proves it for each forbidden direction.

# strata_layer(<target> <folder> [PRIVATE]): <target> compiles with the view of
# <folder>; PUBLIC (the default) lets the targets that link <target> include
# its headers too. The store's src/ is PRIVATE: its headers are its own.
function(strata_layer target folder)
  set(visibility PUBLIC)
  if(ARGC GREATER 2)
    set(visibility ${ARGV2})
  endif()
  set(view ${PROJECT_BINARY_DIR}/layers/${folder})
  file(MAKE_DIRECTORY ${view})
  if(NOT EXISTS ${view}/${folder})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${view}/${folder} SYMBOLIC)
  endif()
  target_include_directories(${target} ${visibility} $<BUILD_INTERFACE:${view}>)
endfunction()

# strata_sources(<out> <folder>...): the .cc files under each folder, with the
# CUDA backend's (cuda_*.cc, *.cu) added only when it is built.
function(strata_sources out)
  set(sources)
  foreach(folder ${ARGN})
    file(GLOB_RECURSE found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.cc)
    file(GLOB_RECURSE cuda CONFIGURE_DEPENDS
      ${PROJECT_SOURCE_DIR}/${folder}/cuda_*.cc ${PROJECT_SOURCE_DIR}/${folder}/*.cu)
    if(cuda)
      list(REMOVE_ITEM found ${cuda})
    endif()
    list(APPEND sources ${found})
    if(STRATA_HAVE_CUDA)
      list(APPEND sources ${cuda})
    endif()
  endforeach()
  set(${out} ${sources} PARENT_SCOPE)
endfunction()
