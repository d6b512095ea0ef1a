#!/usr/bin/env bash
# A malformed GDAKI_VERBS_LOG_ERRORS makes ibv_open_device fail with a message naming the
# variable and the values it accepts, instead of being read as a silent default.
set -u
lib=$1
command -v ibv_devinfo >/dev/null || { echo "SKIP: ibv_devinfo not installed (apt-get install ibverbs-utils)"; exit 77; }
out=$(GDAKI_VERBS_LOG_ERRORS=maybe LD_PRELOAD="$lib" ibv_devinfo -d gdaki_soft0 2>&1)
rc=$?
echo "$out"
[ "$rc" != 0 ] || { echo "FAIL: ibv_devinfo opened the device despite GDAKI_VERBS_LOG_ERRORS=maybe"; exit 1; }
echo "$out" | grep -q "GDAKI_VERBS_LOG_ERRORS='maybe': expected 1/0" || { echo "FAIL: no message naming the variable"; exit 1; }
out=$(GDAKI_VERBS_LOG_ERRORS=1 LD_PRELOAD="$lib" ibv_devinfo -d gdaki_soft0 2>&1) || { echo "$out"; echo "FAIL: a well-formed value was refused"; exit 1; }
echo PASS
