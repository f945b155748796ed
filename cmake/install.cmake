# Installation: libraries, headers, the shmsem command, man pages, a
# pkg-config file and a CMake package (find_package(shmsem CONFIG)).
# Included by the root CMakeLists.txt; everything takes its version from
# PROJECT_VERSION, stated once there.
include(CMakePackageConfigHelpers)

set(SHMSEM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/shmsem)

# Libraries, exported as shmsem::shmsem and shmsem::shmsem_static.
install(TARGETS shmsem shmsem_static
  EXPORT shmsemTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
          NAMELINK_COMPONENT devel
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(SHMSEM_INSTALL_HEADERS
    ${PROJECT_SOURCE_DIR}/libshmsem/include/shmsem/shmsem.h
    ${PROJECT_SOURCE_DIR}/libshmsem/include/shmsem/uring.h
    ${PROJECT_SOURCE_DIR}/libshmsem/include/shmsem/inspect.h
    ${PROJECT_BINARY_DIR}/include/shmsem/version.h)
if(EXISTS ${PROJECT_SOURCE_DIR}/libshmsem/include/shmsem/shmsem.hpp)
  list(APPEND SHMSEM_INSTALL_HEADERS  # the C++ Lease wrapper
       ${PROJECT_SOURCE_DIR}/libshmsem/include/shmsem/shmsem.hpp)
endif()
install(FILES ${SHMSEM_INSTALL_HEADERS}
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shmsem COMPONENT devel)

# The command.
if(TARGET shmsem_cli)
  install(TARGETS shmsem_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          COMPONENT runtime)
endif()

# Man pages: the sources in man/ carry @PROJECT_VERSION@ in their .TH line;
# they are generated into ${PROJECT_BINARY_DIR}/man/man<N>/ (the installed
# layout). A source that only names another (".so man3/x.3", one page for a
# family) is generated as a copy of that page: `man -l` on a ".so" page
# resolves the name against the current directory, not the manual's root,
# and fails anywhere but there.
file(GLOB SHMSEM_MAN_SOURCES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/man/*.1 ${PROJECT_SOURCE_DIR}/man/*.3
     ${PROJECT_SOURCE_DIR}/man/*.7)
foreach(page IN LISTS SHMSEM_MAN_SOURCES)
  get_filename_component(page_name ${page} NAME)
  string(REGEX REPLACE "^.*\\.([0-9])$" "\\1" section ${page_name})
  file(READ ${page} page_text)
  if(page_text MATCHES "^\\.so man[0-9]/([^\n]+)\n?$")
    set(page ${PROJECT_SOURCE_DIR}/man/${CMAKE_MATCH_1})
  endif()
  configure_file(${page} ${PROJECT_BINARY_DIR}/man/man${section}/${page_name} @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/man/man${section}/${page_name}
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT doc)
endforeach()

# pkg-config. Generated at install time, so `cmake --install --prefix X`
# writes paths under X rather than the configure-time prefix.
set(SHMSEM_PC_STAGED ${PROJECT_BINARY_DIR}/pkgconfig/shmsem.pc)
install(CODE "
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  set(PROJECT_DESCRIPTION \"${PROJECT_DESCRIPTION}\")
  set(SHMSEM_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  if(IS_ABSOLUTE \"${CMAKE_INSTALL_LIBDIR}\")
    set(SHMSEM_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  else()
    set(SHMSEM_PC_LIBDIR \"\\\${prefix}/${CMAKE_INSTALL_LIBDIR}\")
  endif()
  if(IS_ABSOLUTE \"${CMAKE_INSTALL_INCLUDEDIR}\")
    set(SHMSEM_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  else()
    set(SHMSEM_PC_INCLUDEDIR \"\\\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}\")
  endif()
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/shmsem.pc.in\"
                 \"${SHMSEM_PC_STAGED}\" @ONLY)
" COMPONENT devel)
install(FILES ${SHMSEM_PC_STAGED}
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT devel)

# CMake package: shmsemConfig.cmake, its version file, the exported targets.
install(EXPORT shmsemTargets NAMESPACE shmsem:: DESTINATION ${SHMSEM_CMAKE_DIR}
        COMPONENT devel)
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/shmsemConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/shmsemConfig.cmake
  INSTALL_DESTINATION ${SHMSEM_CMAKE_DIR})
# Pre-1.0: a minor version bump may change the API (SameMinorVersion).
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/shmsemConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/shmsemConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/shmsemConfigVersion.cmake
        DESTINATION ${SHMSEM_CMAKE_DIR} COMPONENT devel)
