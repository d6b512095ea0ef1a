# Checks that a built binary carries the device-facing barriers arch.hpp names for its
# architecture, i.e. that the data path took the architecture's branch and not the generic
# fallback (whose C++ fences compile to "dmb ish", correct for CPU threads only).
#   cmake -DOBJDUMP=<objdump> -DBINARY=<file> "-DEXPECT=<regex>;<regex>..." -P check-barriers.cmake
# scripts/test.sh's aarch64 pass runs it on a unit test that posts through sq_submit.
# Seen failing (2026-12-04) on the arch.hpp before the aarch64 branch: sq_submit compiled
# to "dmb ish ... stlr ... dmb ish ... str", no "dmb oshst" and no "dsb st".
foreach(_var OBJDUMP BINARY EXPECT)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "check-barriers: -D${_var}=... is required")
  endif()
endforeach()
execute_process(COMMAND ${OBJDUMP} -d --no-show-raw-insn ${BINARY}
                OUTPUT_VARIABLE _asm RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "check-barriers: ${OBJDUMP} failed on ${BINARY}: ${_err}")
endif()
string(REPLACE "\t" " " _asm "${_asm}")  # objdump separates mnemonic and operands with a tab
set(_missing "")
foreach(_re IN LISTS EXPECT)
  string(REGEX MATCHALL "${_re}" _hits "${_asm}")
  list(LENGTH _hits _n)
  message(STATUS "check-barriers: ${BINARY}: '${_re}' x ${_n}")
  if(_n EQUAL 0)
    list(APPEND _missing "${_re}")
  endif()
endforeach()
if(_missing)
  message(FATAL_ERROR "check-barriers: ${BINARY} has no instruction matching: ${_missing} "
                      "(include/gdaki/device/arch.hpp did not take this architecture's branch)")
endif()
