#!/usr/bin/env bash
# Runs one libFuzzer harness for ctest (tests/fuzz/CMakeLists.txt).
#   run_fuzzer.sh regress <binary> <input dir>...     every file once (seeds, regress/)
#   run_fuzzer.sh fuzz <binary> <work dir> <corpus dir> fuzz for GDAKI_FUZZ_SECONDS (20)
#   run_fuzzer.sh long <binary> <work dir> <corpus dir> <cpu seconds>
#                                                     fuzz until the process has used that much
#                                                     CPU (user+sys), however busy the machine
# An empty <binary> means clang's libFuzzer was not usable at configure time: SKIP (77).
set -euo pipefail
mode=$1 bin=$2
shift 2
if [[ -z "$bin" ]]; then
  echo "SKIP: clang++ with -fsanitize=fuzzer (libFuzzer, Debian libclang-rt-14-dev) not found at configure time"
  exit 77
fi
case "$mode" in
  regress)
    files=()
    for d in "$@"; do
      while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$d" -type f ! -name '.*' ! -name '*.md' -print0)
    done
    if ((${#files[@]} == 0)); then echo "no inputs in $*"; exit 0; fi
    # Given files (not directories), libFuzzer runs each once and fails on the first crash.
    # -error_exitcode=1: libFuzzer's default for a crash is 77, which ctest reads as SKIP
    # (SKIP_RETURN_CODE 77), so a crashing input used to show as skipped, not failed.
    exec "$bin" -error_exitcode=1 -timeout_exitcode=1 -timeout=10 "${files[@]}"
    ;;
  fuzz)
    work=$1 corpus=$2
    mkdir -p "$work"
    # New inputs go to the work directory (never into the source tree); crashes land there
    # too, to be minimised and copied into tests/fuzz/regress/<fuzzer>/ once fixed.
    exec "$bin" -error_exitcode=1 -timeout_exitcode=1 -max_total_time="${GDAKI_FUZZ_SECONDS:-20}" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/" "$work" "$corpus"
    ;;
  long)
    work=$1 corpus=$2 budget=$3
    mkdir -p "$work"
    # Wall time says little on a shared machine; the budget is the fuzzer's own CPU time,
    # read from ps every few seconds. SIGINT makes libFuzzer print its final stats.
    # -timeout is wall time (SIGALRM): a niced fuzzer on a loaded machine can wait longer
    # than 10 s for a core, so the long mode allows 10 minutes per input.
    "$bin" -timeout=600 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" "$work" "$corpus" &
    pid=$!
    start=$SECONDS
    while kill -0 "$pid" 2>/dev/null; do
      cpu=$(ps -o times= -p "$pid" 2>/dev/null | tr -d ' ')
      if [[ -n "$cpu" ]] && ((cpu >= budget)); then kill -INT "$pid"; break; fi
      sleep 5
    done
    rc=0
    wait "$pid" || rc=$?
    echo "long run: ${cpu:-?} CPU-seconds in $((SECONDS - start)) s wall, exit $rc"
    # 0: no finding; libFuzzer exits 72 after SIGINT on some versions (also no finding).
    ((rc == 0 || rc == 72 || rc == 130)) || exit "$rc"
    ;;
  *) echo "usage: $0 regress|fuzz <binary> ..."; exit 2 ;;
esac
