# Cross toolchain: Debian's g++-aarch64-linux-gnu, tests run under qemu-user.
# Used by the `aarch64` preset (CMakePresets.json) and by scripts/test.sh's aarch64 pass;
# scripts/install-deps.sh installs the compiler and qemu-user.
#
# The target's libraries and headers come from the cross sysroot only (Debian's cross
# packages install it under /usr/aarch64-linux-gnu); the build machine's x86-64 libraries
# must never be picked up. Programs (ccache, qemu) come from the build machine.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(GDAKI_AARCH64_TRIPLE aarch64-linux-gnu)
set(GDAKI_AARCH64_SYSROOT /usr/${GDAKI_AARCH64_TRIPLE}
    CACHE PATH "Target libraries and headers (Debian cross layout)")
set(CMAKE_C_COMPILER ${GDAKI_AARCH64_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${GDAKI_AARCH64_TRIPLE}-g++)

set(CMAKE_FIND_ROOT_PATH ${GDAKI_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# ctest runs every test binary through qemu-user (no binfmt registration needed): -L points
# the emulated dynamic loader at the target's libraries.
find_program(GDAKI_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(GDAKI_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${GDAKI_QEMU_AARCH64} -L ${GDAKI_AARCH64_SYSROOT})
endif()
