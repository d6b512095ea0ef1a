#!/usr/bin/env bash
# Every --help is plain text: no NUL or other control bytes (a uint8_t default once put a
# NUL into `gdaki bench --help`, so grep called it binary; this test failed then).
# Usage: help_is_text.sh GDAKI
set -u
gdaki=$1
status=0
for sub in "" devices doctor dump bench env; do
  # shellcheck disable=SC2086
  bad=$("$gdaki" $sub --help 2>&1 | LC_ALL=C tr -d '\t\n\040-\176' | wc -c)
  lines=$("$gdaki" $sub --help 2>&1 | wc -l)
  echo "gdaki $sub --help: $lines lines, $bad control or non-ASCII bytes"
  ((lines > 3)) || { echo "FAIL: gdaki $sub --help printed almost nothing"; status=1; }
  ((bad == 0)) || { echo "FAIL: gdaki $sub --help is not plain text"; status=1; }
done
((status == 0)) && echo PASS
exit $status
