#!/usr/bin/env bash
# Runs one libFuzzer harness for ctest (tests/fuzz/CMakeLists.txt).
#   run_fuzzer.sh regress <binary> <input dir>...     every file once (seeds, regress/)
#   run_fuzzer.sh fuzz <binary> <work dir> <corpus dir> fuzz for GDAKI_FUZZ_SECONDS (20)
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
    exec "$bin" -timeout=10 "${files[@]}"
    ;;
  fuzz)
    work=$1 corpus=$2
    mkdir -p "$work"
    # New inputs go to the work directory (never into the source tree); crashes land there
    # too, to be minimised and copied into tests/fuzz/regress/<fuzzer>/ once fixed.
    exec "$bin" -max_total_time="${GDAKI_FUZZ_SECONDS:-20}" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/" "$work" "$corpus"
    ;;
  *) echo "usage: $0 regress|fuzz <binary> ..."; exit 2 ;;
esac
