#!/bin/bash
# One prepared GPU check (issue 16, Done means 7), in two halves so a lent GPU machine's
# minutes go to running, not building:
#   bash scripts/gpu-session.sh prepare   # here: build, then gather binaries in .gpurun/
#   bash scripts/gpu-session.sh run       # there (device tool, carry .gpurun): run them
# "run" executes the gpu label's scenario program per backend, then the shared reference
# check (../shared/gpu/gpu_check.cu, built against this tree) CHECK_RUNS times (default 10:
# "not one slot wrong in ten consecutive runs"), then the CUDA example. A summary goes to
# stdout and everything to $OUT/gpu-session.log.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
prepare)
  set -e
  cd "$here"
  cmake --preset release >/dev/null
  cmake --build --preset release --target gdaki gdaki_gpu_scenarios gdaki_example_cuda_put
  mkdir -p .gpurun
  cp -L build/release/libgdaki.so.0 build/release/tests/gpu/gdaki_gpu_scenarios .gpurun/
  cp build/release/examples/gdaki_example_cuda_put .gpurun/cuda_kernel_put
  if [ -f ../shared/gpu/gpu_check.cu ]; then
    nvcc -std=c++20 -O2 -arch=sm_90 -Iinclude -o .gpurun/gpu_check ../shared/gpu/gpu_check.cu \
      -Lbuild/release -lgdaki -Xlinker -rpath,'$ORIGIN'
  fi
  cp scripts/gpu-session.sh .gpurun/
  echo "ready: carry .gpurun and run 'bash .gpurun/gpu-session.sh run'"
  ;;
run)
  # Everything goes to stdout and to one log file: the device tool brings back only a few
  # files, and a crashing program's last lines must still be seen.
  cd "$(dirname "$0")"
  export LD_LIBRARY_PATH=$PWD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  OUT=${OUT:-/tmp/gdaki-gpu}; mkdir -p "$OUT"
  log=$OUT/gpu-session.log
  nvidia-smi -L 2>&1 | head -2 | tee -a "$log"
  for b in direct cpu-assisted proxy automatic; do
    timeout 60 ./gdaki_gpu_scenarios "$b" >"$OUT/run.txt" 2>&1
    rc=$?
    cat "$OUT/run.txt" >>"$log"
    echo "scenarios $b rc=$rc" | tee -a "$log"
    if [ "$rc" = 0 ]; then grep -E "FAIL|grid-shared|Mops|export chose|passed," "$OUT/run.txt" | cut -c1-200
    else tail -25 "$OUT/run.txt" | cut -c1-200; fi
  done
  if [ -x ./gpu_check ]; then
    for i in $(seq 1 "${CHECK_RUNS:-10}"); do
      timeout 45 ./gpu_check >"$OUT/run.txt" 2>&1
      rc=$?
      cat "$OUT/run.txt" >>"$log"
      echo "gpu_check run $i rc=$rc: $(tail -1 "$OUT/run.txt")" | tee -a "$log"
      if [ "$i" = 1 ]; then grep -E "FAIL|grid|Mops|handle" "$OUT/run.txt" | cut -c1-200
      else grep -E "FAIL" "$OUT/run.txt" | head -5 | cut -c1-200; fi
    done
  fi
  if [ -x ./cuda_kernel_put ]; then
    timeout 60 ./cuda_kernel_put >"$OUT/run.txt" 2>&1; rc=$?
    cat "$OUT/run.txt" >>"$log"
    echo "example rc=$rc"; tail -3 "$OUT/run.txt"
  fi
  rm -f "$OUT/run.txt"
  ;;
*) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
