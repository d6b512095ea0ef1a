#!/usr/bin/env bash
# ibv_devinfo, unchanged, lists the soft device with an active Ethernet (RoCE-like) port
# and its GID when libgdaki_verbs.so is preloaded.
set -u
lib=$1
command -v ibv_devinfo >/dev/null || { echo "SKIP: ibv_devinfo not installed (apt-get install ibverbs-utils)"; exit 77; }
out=$(LD_PRELOAD="$lib" ibv_devinfo -v 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || { echo "FAIL: ibv_devinfo exited with $rc"; exit 1; }
for want in "hca_id:	gdaki_soft0" "PORT_ACTIVE" "link_layer:		Ethernet" "GID\[  0\]:		50f7:"; do
  echo "$out" | grep -q -E "$want" || { echo "FAIL: no line matching '$want'"; exit 1; }
done
echo PASS
