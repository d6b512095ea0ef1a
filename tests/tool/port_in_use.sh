#!/usr/bin/env bash
# `gdaki bench --server -p PORT` on a port another process listens on must fail at once,
# saying the port is in use. Usage: port_in_use.sh GDAKI
set -u
gdaki=$1
py=$(command -v python3 || echo /usr/bin/python3)
fifo=$(mktemp -u)
mkfifo "$fifo"
# A listener on an ephemeral port, alive until we kill it; it prints the port it got.
"$py" -c '
import socket, sys, time
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
time.sleep(60)' >"$fifo" &
holder=$!
read -r port <"$fifo"
rm -f "$fifo"
trap 'kill $holder 2>/dev/null' EXIT
out=$(timeout 20 "$gdaki" bench write_bw --server -p "$port" 2>&1)
rc=$?
printf '%s\n--- exit status %s\n' "$out" "$rc"
((rc != 0 && rc != 124)) || { echo "FAIL: expected a prompt non-zero exit"; exit 1; }
grep -q "port $port.*in use" <<<"$out" || { echo "FAIL: no 'port $port ... in use' message"; exit 1; }
echo PASS
