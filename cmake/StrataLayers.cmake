# Layers as targets. Sources include each other by their path from the
# project root ("tiers/nvme/nvme_tier.h"), but no target sees the root:
# strata_layer() gives a target an include view (a folder in the build tree
# holding links to the layer's own sources) and targets see the views of what
# they link. Data flows down (docs/design.md: apps -> train/run -> model ->
# compute, comm -> store -> scheduler and tiers -> base; data -> io), so an
# include against the flow names a file that is not on the compiler's path
# and fails to build. tests/layering_check.cmake proves it for each forbidden
# direction.

# strata_layer(<target> <folder> [PRIVATE]): <target> compiles with the view of
# <folder> (a path from the project root, such as tiers or train/compute);
# PUBLIC (the default) lets the targets that link <target> include its headers
# too. The store's src/ is PRIVATE: its headers are its own.
#
# A top folder (tiers) is seen whole, subfolders included: one target holds
# them. A nested folder (train/compute) is seen file by file, without its
# subfolders: train/compute/cuda is a target of its own, and what links only
# train/compute must not see the CUDA kernels' headers.
function(strata_layer target folder)
  set(visibility PUBLIC)
  if(ARGC GREATER 2)
    set(visibility ${ARGV2})
  endif()
  string(REPLACE "/" "_" view_name ${folder})
  set(view ${PROJECT_BINARY_DIR}/layers/${view_name})
  if(NOT folder MATCHES "/")
    file(MAKE_DIRECTORY ${view})
    if(NOT EXISTS ${view}/${folder})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${view}/${folder} SYMBOLIC)
    endif()
  else()
    file(MAKE_DIRECTORY ${view}/${folder})
    # CONFIGURE_DEPENDS: a header added later gets its link at the next build.
    file(GLOB headers CONFIGURE_DEPENDS LIST_DIRECTORIES false
      ${PROJECT_SOURCE_DIR}/${folder}/*.h)
    foreach(header ${headers})
      get_filename_component(name ${header} NAME)
      if(NOT EXISTS ${view}/${folder}/${name})
        file(CREATE_LINK ${header} ${view}/${folder}/${name} SYMBOLIC)
      endif()
    endforeach()
  endif()
  target_include_directories(${target} ${visibility} $<BUILD_INTERFACE:${view}>)
endfunction()

# strata_sources(<out> <folder>...): the .cc (and .cu) files directly in each
# folder (RECURSE for a top folder whose subfolders belong to its target),
# with the CUDA backend's (cuda_*.cc, *.cu) added only when it is built.
function(strata_sources out)
  set(sources)
  set(mode GLOB)
  foreach(folder ${ARGN})
    if(folder STREQUAL "RECURSE")
      set(mode GLOB_RECURSE)
      continue()
    endif()
    file(${mode} found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.cc)
    file(${mode} cuda CONFIGURE_DEPENDS
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
