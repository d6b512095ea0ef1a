#!/usr/bin/env bash
# Runs one unchanged RDMA program as a server and a client on the soft device through
# libgdaki_verbs.so, and checks what they print.
#
#   run_pair.sh LIB WHERE PROGRAM [ARGS...]
#     LIB    path of libgdaki_verbs.so
#     WHERE  host:  two processes on this host (the soft NIC's same-host wire)
#            netns: each process in its own network namespace, joined by a veth pair
#                   made here (the TCP wire)
#     PROGRAM ibv_rc_pingpong, ibv_srq_pingpong or a perftest binary; ARGS are given to
#            both sides.
#
# Fails on a non-zero exit, on any line that reports an error, and on a result row with
# a zero figure; exits 77 (SKIP) with the reason when the program or namespaces are
# missing.
set -u
lib=$1 where=$2 prog=$3
shift 3
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

command -v "$prog" >/dev/null || skip "$prog not installed (apt-get install ibverbs-utils perftest)"
[ -r "$lib" ] || fail "$lib not built"

work=$(mktemp -d)
ns_a="" ns_b=""
cleanup() {
  [ -n "${srv_pid:-}" ] && kill "$srv_pid" 2>/dev/null
  [ -n "$ns_a" ] && ip netns del "$ns_a" 2>/dev/null
  [ -n "$ns_b" ] && ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The processes of one job share the wire secret (docs/soft-nic.md, Security).
export GDAKI_SOFT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
# A port nobody listens on now (the kernel's pick); a program that still cannot listen on
# it (taken in between by a test running beside this one) is run again on another.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
server_addr=127.0.0.1
run_a=() run_b=()
if [ "$where" = netns ]; then
  command -v ip >/dev/null || skip "iproute2 (ip) not installed"
  ns_a="gdakiv-a-$$" ns_b="gdakiv-b-$$"
  ip netns add "$ns_a" 2>/dev/null || skip "cannot create network namespaces here (needs root or CAP_SYS_ADMIN)"
  ip netns add "$ns_b" || fail "ip netns add $ns_b"
  ip link add "va$$" netns "$ns_a" type veth peer name "vb$$" netns "$ns_b" || skip "cannot create a veth pair here"
  ip -n "$ns_a" addr add 10.203.0.1/24 dev "va$$" && ip -n "$ns_a" link set "va$$" up && ip -n "$ns_a" link set lo up
  ip -n "$ns_b" addr add 10.203.0.2/24 dev "vb$$" && ip -n "$ns_b" link set "vb$$" up && ip -n "$ns_b" link set lo up
  server_addr=10.203.0.1
  run_a=(ip netns exec "$ns_a" env GDAKI_SOFT_WIRE=tcp GDAKI_SOFT_LISTEN=10.203.0.1)
  run_b=(ip netns exec "$ns_b" env GDAKI_SOFT_WIRE=tcp GDAKI_SOFT_LISTEN=10.203.0.2)
elif [ "$where" != host ]; then
  fail "WHERE must be host or netns, not $where"
fi

for attempt in 1 2 3; do
  port=$(free_port)
  dev_args=(-d gdaki_soft0)
  case "$prog" in
    ibv_rc_pingpong | ibv_srq_pingpong) dev_args+=(-g 0 -p "$port") ;;
    *) dev_args+=(-p "$port") ;;
  esac
  "${run_a[@]}" env LD_PRELOAD="$lib" "$prog" "${dev_args[@]}" "$@" >"$work/server.log" 2>&1 &
  srv_pid=$!
  # The client retries the connection itself for a while (perftest) or we retry it here,
  # while the server is still there to connect to.
  ok=0
  for _ in $(seq 1 50); do
    sleep 0.2
    if "${run_b[@]}" env LD_PRELOAD="$lib" "$prog" "${dev_args[@]}" "$@" "$server_addr" >"$work/client.log" 2>&1; then
      ok=1
      break
    fi
    grep -q -i -E "couldn't connect|connection refused|Unable to open file descriptor" "$work/client.log" || break
    kill -0 "$srv_pid" 2>/dev/null || break
  done
  wait "$srv_pid"
  srv_rc=$?
  srv_pid=""
  # The server could not listen on the port (ibv_*_pingpong: "Couldn't listen", perftest:
  # "Couldn't bind"): only then is the pair run again, on another port.
  grep -q -i -E "couldn't listen|couldn't bind|unable to bind" "$work/server.log" || break
  echo "(port $port was taken before the server could listen on it: again on another)"
done
for side in server client; do
  echo "----- $side ($prog $* on $where)"
  cat "$work/$side.log"
done
[ "$ok" = 1 ] || fail "the client failed"
[ "$srv_rc" = 0 ] || fail "the server exited with $srv_rc"

# Error lines: rdma-core examples and perftest print these on any failure.
if grep -i -E "couldn't|failed|error|unable|not supported|completion with|wc status|gdaki verbs:" \
     "$work/server.log" "$work/client.log" | grep -v -E "neither GDAKI_SOFT_SECRET"; then
  fail "an error line (above)"
fi

# Figures. ibv_rc_pingpong, ibv_srq_pingpong: "N bytes in S seconds = R Mbit/sec" and
# "usec/iter".
# perftest: rows of numbers under the "#bytes" header; every figure must be non-zero
# (a latency's standard deviation and percentiles may be 0.00 on a coarse clock).
python3 - "$prog" "$work/server.log" "$work/client.log" <<'PY' || exit 1
import re, sys
prog, logs = sys.argv[1], sys.argv[2:]
rows = 0
for path in logs:
    lines = open(path, errors="replace").read().splitlines()
    if prog in ("ibv_rc_pingpong", "ibv_srq_pingpong"):
        for l in lines:
            m = re.match(r"\s*(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec", l)
            if m:
                rows += 1
                nbytes, secs, mbit = int(m.group(1)), float(m.group(2)), float(m.group(3))
                # Two decimals: 1-byte messages slower than 5,000 bit/s print 0.00, which
                # is a rounding when bytes and seconds say so (the usec/iter line is checked).
                if secs == 0 or (mbit == 0 and nbytes * 8 / secs / 1e6 >= 0.005):
                    sys.exit(f"FAIL: zero figure in {path}: {l}")
            m = re.match(r"\s*(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter", l)
            if m and (float(m.group(2)) == 0 or float(m.group(3)) == 0):
                sys.exit(f"FAIL: zero figure in {path}: {l}")
        continue
    header = None
    for l in lines:
        if l.strip().startswith("#bytes"):
            # Column names may hold one space ("BW peak[MB/sec]"); every one but the first
            # two ends with its unit in brackets.
            header = re.findall(r"#bytes|#iterations|[^\s\[]+(?: [^\s\[]+)?\[[^\]]*\]", l)
            continue
        f = l.split()
        if header and f and all(re.fullmatch(r"-?nan|[\d.]+", x) for x in f) and re.fullmatch(r"\d+", f[0]):
            rows += 1
            row = dict(zip(header, f))
            rate = float(row.get("MsgRate[Mpps]", "0").replace("nan", "0"))
            for name, val in zip(header, f):
                # A latency's spread (stdev, percentiles) may be 0 or nan with few samples.
                if name.startswith("t_stdev") or name.startswith("99"):
                    continue
                # MB/s with two decimals: 2-byte messages below 2,500 per second print
                # 0.00, a rounding of a positive figure when the same row's rate is not 0.
                if name.startswith("BW") and float(val) == 0 and rate > 0 and int(f[0]) < 64:
                    continue
                # perftest's receiving side of ib_send_bw prints a "peak" below its own
                # average (0.00 beside 2.76 MB/s): an artifact of how it samples, not a
                # zero rate, when the row's average is not 0.
                avg = row.get("BW average[MB/sec]", "0")
                if name == "BW peak[MB/sec]" and float(val) == 0 and "nan" not in avg and float(avg) > 0:
                    continue
                if "nan" in val or float(val) == 0:
                    sys.exit(f"FAIL: {name} is 0 in {path}: {l}")
if rows == 0:
    sys.exit("FAIL: no result rows found")
print(f"PASS: {rows} result rows, every figure non-zero")
PY
