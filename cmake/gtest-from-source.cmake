# GoogleTest for a cross build, compiled from the sources Debian's libgtest-dev ships in
# /usr/src/googletest (the host's libgtest.a is x86-64 and cannot be linked). Included
# right after project(gdaki) through CMAKE_PROJECT_gdaki_INCLUDE, set by the aarch64
# preset only; native builds keep find_package(GTest) on the installed library.
#
# Multiarch libgtest-dev:arm64 would also work, but needs `dpkg --add-architecture arm64`
# on the build machine: a machine-wide change for every user of it, which this avoids.
set(GDAKI_GTEST_SOURCE_DIR /usr/src/googletest CACHE PATH "GoogleTest sources built for the target")
if(NOT EXISTS ${GDAKI_GTEST_SOURCE_DIR}/CMakeLists.txt)
  message(FATAL_ERROR "gdaki: cross build needs GoogleTest sources in ${GDAKI_GTEST_SOURCE_DIR} "
                      "(Debian: apt-get install libgtest-dev libgmock-dev)")
endif()

set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
set(BUILD_GMOCK ON CACHE BOOL "" FORCE)
# Built only when a test links it (EXCLUDE_FROM_ALL), with its own warning flags.
add_subdirectory(${GDAKI_GTEST_SOURCE_DIR} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL SYSTEM)
foreach(_lib gtest gtest_main gmock gmock_main)
  if(NOT TARGET GTest::${_lib})
    add_library(GTest::${_lib} ALIAS ${_lib})
  endif()
endforeach()

# tests/CMakeLists.txt calls find_package(GTest REQUIRED): answer it with the targets above.
# A config file in CMAKE_FIND_PACKAGE_REDIRECTS_DIR takes precedence over FindGTest.cmake
# (CMake >= 3.24), the mechanism FetchContent's OVERRIDE_FIND_PACKAGE uses.
file(WRITE ${CMAKE_FIND_PACKAGE_REDIRECTS_DIR}/gtest-config.cmake
     "# Written by cmake/gtest-from-source.cmake: GTest::* are built from source in this tree.\n")
file(WRITE ${CMAKE_FIND_PACKAGE_REDIRECTS_DIR}/gtest-config-version.cmake
     "set(PACKAGE_VERSION_COMPATIBLE TRUE)\nset(PACKAGE_VERSION_EXACT FALSE)\n")
