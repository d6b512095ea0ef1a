#!/usr/bin/env bash
# The test command: builds gdaki and runs every test tier, then the sanitizer builds of the
# tiers that exercise concurrency and memory ownership. Exits non-zero if any test fails.
#   GDAKI_TEST_SANITIZERS=0   skip the ASan/UBSan and TSan passes (quick local runs)
#   GDAKI_REQUIRE_TIERS=1     a tier configure could not build (a missing optional
#                             dependency: its placeholder test tier_missing.*) fails the run
#                             instead of reporting SKIP; on by default under CI=true
set -euo pipefail
if [[ ${CI:-} == true && -z ${GDAKI_REQUIRE_TIERS:-} ]]; then
  export GDAKI_REQUIRE_TIERS=1
fi
cd "$(dirname "$0")/.."
jobs=$(nproc)
# ccache (CMakeLists.txt uses it where installed): paths relative to the checkout and no
# working directory in the hash, so a fresh clone in another folder reuses earlier objects.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

run_preset() {
  local preset=$1; shift
  echo "=== [$preset] configure + build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "=== [$preset] ctest $*"
  ctest --preset "$preset" -j "$jobs" "$@"
}

run_preset release
if [[ "${GDAKI_TEST_SANITIZERS:-1}" != 0 ]]; then
  run_preset asan-ubsan -L 'unit|soft|device|proxy|wire' -LE 'install'
  # Not under TSan: the wire failure tests fork a process that already runs threads, which
  # TSan cannot follow ("starting new threads after multi-threaded fork is not
  # supported"), and the idle-CPU test measures the release build's cost, not TSan's. The
  # wire fault stress (labels stress + wire) starts peer processes and kills them; the
  # stress label keeps it out already, the name keeps it out if its labels change.
  run_preset tsan -L 'unit|soft|device|proxy|wire' -LE 'install|stress' -E 'soft_idle|wire_failures|wire_fault_stress'
fi
echo "test.sh: all test passes green"
