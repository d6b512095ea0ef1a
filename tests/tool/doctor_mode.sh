#!/usr/bin/env bash
# `gdaki doctor --mode MODE`: exit 0 with "can run", or exit 1 with "cannot run" and at
# least one hint; anything else (a crash, a missing hint) fails. The outcome is pinned:
# this script probes the machine itself, without gdaki's code (a GPU: libcuda.so.1 and an
# /dev/nvidiaN node; a ConnectX: an RDMA device bound to mlx5_core in sysfs; libfabric:
# libfabric.so.1 known to the loader), and derives whether MODE must run or must fail.
# Where the probe cannot decide (GPU and ConnectX both present: peer memory and the
# doorbell mapping need a real run), it exits 77 (SKIP) with the reason.
# It fails, e.g., if doctor said a GPU mode can run on a machine without a GPU, or said
# soft cannot run. Usage: doctor_mode.sh GDAKI MODE
set -u
gdaki=$1 mode=$2

loader_has() { /sbin/ldconfig -p 2>/dev/null | grep -q "$1"; }
have_gpu=no
if loader_has 'libcuda\.so\.1 ' && compgen -G '/dev/nvidia[0-9]*' >/dev/null; then have_gpu=yes; fi
have_mlx5=no
for d in /sys/class/infiniband/*/device/driver; do
  [[ -e $d && $(basename "$(readlink -f "$d")") == mlx5_core ]] && have_mlx5=yes
done
have_libfabric=no
loader_has 'libfabric\.so\.1 ' && have_libfabric=yes
echo "probe: gpu=$have_gpu mlx5=$have_mlx5 libfabric=$have_libfabric"

expect=""
case $mode in
  soft) expect=runs ;;
  mlx5) [[ $have_mlx5 == yes ]] && expect=runs || expect=fails ;;
  proxy) [[ $have_gpu == yes && $have_libfabric == yes ]] && expect=runs || expect=fails ;;
  gpu-doorbell | cpu-assisted)
    if [[ $have_gpu == no || $have_mlx5 == no ]]; then
      expect=fails
    else
      echo "SKIP: a GPU and a ConnectX are present; whether $mode runs also depends on peer memory and the doorbell mapping, which this probe does not check"
      exit 77
    fi ;;
  *) echo "FAIL: unknown mode $mode"; exit 1 ;;
esac
echo "expect: $mode $expect"

out=$("$gdaki" doctor --mode "$mode" 2>&1)
rc=$?
printf '%s\n--- exit status %s\n' "$out" "$rc"
if ((rc == 0)); then
  grep -q "Mode $mode can run" <<<"$out" || { echo "FAIL: exit 0 without 'can run'"; exit 1; }
  [[ $expect == runs ]] || { echo "FAIL: doctor says mode $mode can run, but this machine lacks what it needs"; exit 1; }
elif ((rc == 1)); then
  grep -q "Mode $mode cannot run" <<<"$out" || { echo "FAIL: exit 1 without 'cannot run'"; exit 1; }
  grep -q "hint: " <<<"$out" || { echo "FAIL: no hint"; exit 1; }
  [[ $expect == fails ]] || { echo "FAIL: doctor says mode $mode cannot run, but this machine has what it needs"; exit 1; }
else
  echo "FAIL: exit status $rc"; exit 1
fi
echo PASS
