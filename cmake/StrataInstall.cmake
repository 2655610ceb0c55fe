# Installs the public headers and an exported strata::strata target with a
# package config, so `find_package(strata)` works for users.
include(CMakePackageConfigHelpers)
install(TARGETS strata strata_api strata_base strata_tiers strata_scheduler
        EXPORT strataTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/strata DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS strata_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT strataTargets NAMESPACE strata::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
configure_package_config_file(cmake/strataConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/strataConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/strataConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/strataConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/strataConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
# Bash completion for the strata command (apps/cli/bash_completion.h), where
# bash-completion finds it by the command's name.
install(FILES ${PROJECT_BINARY_DIR}/apps/strata.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME strata)
