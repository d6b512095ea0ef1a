#!/usr/bin/env bash
# Runs a command and checks its exit status and output (stdout and stderr together).
# Usage: expect.sh RC [REGEX...] -- COMMAND [ARG...]
#   RC     a number, or "nonzero"
#   REGEX  extended regular expressions (grep -E); every one must match some line
set -u
want_rc=$1
shift
regexes=()
while (($#)) && [[ $1 != -- ]]; do
  regexes+=("$1")
  shift
done
shift  # the --
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "--- exit status $rc"
if [[ $want_rc == nonzero ]]; then
  ((rc != 0)) || { echo "FAIL: expected a non-zero exit status"; exit 1; }
else
  ((rc == want_rc)) || { echo "FAIL: expected exit status $want_rc"; exit 1; }
fi
for re in "${regexes[@]}"; do
  grep -Eq -- "$re" <<<"$out" || { echo "FAIL: output does not match: $re"; exit 1; }
done
echo PASS
