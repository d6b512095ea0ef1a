#!/usr/bin/env bash
# Server/client mode: a server and a client on this host meet over TCP (the out-of-band
# rendezvous) and run over the soft NIC's cross-process wire; the client prints the table.
# In a build without the wire both must stop with the message that says so, and the test
# then reports SKIP (exit 77) with that reason: nothing crossed processes, so it does not
# pass. Usage: rendezvous.sh GDAKI TEST WIRE
set -u
gdaki=$1 test=$2 wire=$3
py=$(command -v python3 || echo /usr/bin/python3)
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sout=$(mktemp)
trap 'rm -f "$sout"' EXIT
timeout 60 "$gdaki" bench "$test" -s 4K -n 100 --wire "$wire" --server -p "$port" --accept-timeout 30 >"$sout" 2>&1 &
server=$!
cout=""
for _ in $(seq 50); do  # the server needs a moment to listen
  cout=$(timeout 30 "$gdaki" bench "$test" -s 4K -n 100 --wire "$wire" -c 127.0.0.1 -p "$port" --connect-timeout 2 2>&1)
  crc=$?
  grep -q "cannot reach" <<<"$cout" || break
  sleep 0.2
done
wait $server
src=$?
printf 'client (exit %s):\n%s\nserver (exit %s):\n%s\n' "$crc" "$cout" "$src" "$(cat "$sout")"
if grep -q "not available in this build" <<<"$cout"; then
  ((crc != 0 && src != 0)) || { echo "FAIL: both ends must fail without the wire"; exit 1; }
  grep -q "not available in this build" "$sout" || { echo "FAIL: the server did not say why"; exit 1; }
  echo "SKIP: the soft NIC's cross-process wire is not available in this build"
  exit 77
else
  ((crc == 0 && src == 0)) || { echo "FAIL: cross-process run failed"; exit 1; }
  grep -Eq "BW average|t_typical" <<<"$cout" || { echo "FAIL: no table from the client"; exit 1; }
  grep -Eq "^ 4096 +100 " <<<"$cout" || { echo "FAIL: no 4096-byte row"; exit 1; }
  # Neither end's teardown may wait out a peer's hold on a mapping (shm_map.cpp says so):
  # both ends held leases on each other's MRs and destroyed their QPs at once.
  if grep -q "waited .* ms for a peer that still holds" <<<"$cout$(cat "$sout")"; then
    echo "FAIL: a deregistration waited for a peer's mapping"; exit 1
  fi
fi
echo PASS
