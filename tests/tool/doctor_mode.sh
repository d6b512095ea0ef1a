#!/usr/bin/env bash
# `gdaki doctor --mode MODE`: exit 0 with "can run", or exit 1 with "cannot run" and at
# least one hint; anything else (a crash, a missing hint) fails. EXPECT ("runs", "fails"
# or "either") pins the outcome where this machine's answer is known.
# Usage: doctor_mode.sh GDAKI MODE EXPECT
set -u
gdaki=$1 mode=$2 expect=$3
out=$("$gdaki" doctor --mode "$mode" 2>&1)
rc=$?
printf '%s\n--- exit status %s\n' "$out" "$rc"
if ((rc == 0)); then
  grep -q "Mode $mode can run" <<<"$out" || { echo "FAIL: exit 0 without 'can run'"; exit 1; }
  [[ $expect != fails ]] || { echo "FAIL: expected mode $mode to be unavailable here"; exit 1; }
elif ((rc == 1)); then
  grep -q "Mode $mode cannot run" <<<"$out" || { echo "FAIL: exit 1 without 'cannot run'"; exit 1; }
  grep -q "hint: " <<<"$out" || { echo "FAIL: no hint"; exit 1; }
  [[ $expect != runs ]] || { echo "FAIL: expected mode $mode to run"; exit 1; }
else
  echo "FAIL: exit status $rc"; exit 1
fi
echo PASS
