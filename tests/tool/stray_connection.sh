#!/usr/bin/env bash
# `gdaki bench --server` refuses connections that do not speak its protocol and keeps
# waiting: two stray connections (one sends an HTTP request, one closes at once) come
# first, then a real client, and the run completes. Before the server learned to refuse,
# it exited on the first stray connection and the client got "cannot reach" or a closed
# connection, so this test failed. Usage: stray_connection.sh GDAKI
set -u
gdaki=$1
py=$(command -v python3 || echo /usr/bin/python3)
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sout=$(mktemp)
trap 'rm -f "$sout"' EXIT
timeout 90 "$gdaki" bench write_bw -s 4K -n 100 --wire tcp --server -p "$port" --accept-timeout 60 >"$sout" 2>&1 &
server=$!
# The strays: wait until the server listens, then send garbage, then connect and leave.
"$py" - "$port" <<'PY' || { echo "FAIL: could not reach the server"; kill "$server"; exit 1; }
import socket, sys, time
port = int(sys.argv[1])
for _ in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit(1)
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
s.settimeout(15)
try:
    while s.recv(4096):
        pass
except OSError:
    pass
s.close()
socket.create_connection(("127.0.0.1", port), timeout=5).close()
PY
cout=$(timeout 60 "$gdaki" bench write_bw -s 4K -n 100 --wire tcp -c 127.0.0.1 -p "$port" --connect-timeout 5 2>&1)
crc=$?
wait "$server"
src=$?
printf 'client (exit %s):\n%s\nserver (exit %s):\n%s\n' "$crc" "$cout" "$src" "$(cat "$sout")"
refusals=$(grep -c "refused a connection from 127.0.0.1:[0-9]* (.*); still waiting for a client$" "$sout")
((refusals == 2)) || { echo "FAIL: expected 2 refusal lines on the server, got $refusals"; exit 1; }
grep -q "did not speak the gdaki bench protocol" "$sout" || { echo "FAIL: the garbage was not named as such"; exit 1; }
if grep -q "not available in this build" <<<"$cout"; then
  echo "SKIP: the refusals hold, but the soft NIC's cross-process wire is not available in this build"
  exit 77
fi
((crc == 0 && src == 0)) || { echo "FAIL: the real client's run did not complete"; exit 1; }
grep -Eq "^ 4096 +100 " <<<"$cout" || { echo "FAIL: no 4096-byte row from the client"; exit 1; }
echo PASS
