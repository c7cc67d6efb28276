#!/usr/bin/env bash
# Where a forwarded call's CPU goes: one mcprouter build in front of mcpbackend (default
# configuration plus EXTRA, a YAML line appended under the backend), router and backend
# pinned to one CPU and mcpload (32 sessions, tools/call echo) to another, as
# bench/cmd/compare pins them. Prints the router's CPU per call split into user and system
# time, its system calls per call (strace -c over 3 s of the run), and the top of a CPU
# profile taken from its admin listener (written to OUT.pprof), and its heap allocations
# per call over the same window (the allocs profile's delta; top sites in
# OUT.allocs.txt) with the collections GODEBUG=gctrace=1 logged meanwhile.
#
#   bash bench/scripts/hop-profile.sh ROUTER_BIN OUT
#   EXTRA='    pipeline: 2' bash bench/scripts/hop-profile.sh ROUTER_BIN OUT
#   bash bench/scripts/hop-profile.sh haproxy OUT   # the floor, measured the same way
#
# With haproxy in place of ROUTER_BIN it runs haproxy as bench/compare does (one thread,
# keep-alive on both sides) and prints the same figures without the profile.
#
# Needs strace and taskset; the system call counts are skipped without strace.
set -euo pipefail
R=$1 OUT=$2 EXTRA=${EXTRA:-} DUR=${DUR:-20}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'kill "$bepid" "$rpid" 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/mcpbackend" ./cmd/mcpbackend
go build -o "$work/mcpload" ./cmd/mcpload
taskset -c 1 "$work/mcpbackend" -listen 127.0.0.1:18390 >"$work/backend.log" 2>&1 &
bepid=$!
tool=b__echo # the router names a backend's tools after the backend
if [ "$R" = haproxy ]; then
	tool=echo
	printf 'global\n  nbthread 1\n  maxconn 8000\ndefaults\n  mode http\n  option http-keep-alive\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  timeout http-keep-alive 60s\nfrontend mcp\n  bind 127.0.0.1:18391\n  default_backend b\nbackend b\n  http-reuse always\n  server b 127.0.0.1:18390\n' >"$work/haproxy.conf"
	taskset -c 1 haproxy -db -f "$work/haproxy.conf" >"$work/router.log" 2>&1 &
	rpid=$!
	# ready when a request through haproxy reaches mcpbackend (any answer but haproxy's 503)
	for _ in $(seq 1 100); do
		code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18391/mcp || true)
		[ "$code" != 000 ] && [ "$code" != 503 ] && break
		sleep 0.1
	done
else
	printf 'listen: 127.0.0.1:18391\nadmin: {listen: 127.0.0.1:18392, pprof: true}\nbackends:\n  - name: b\n    url: http://127.0.0.1:18390/mcp\n%s\n' "$EXTRA" >"$work/router.yaml"
	GODEBUG=gctrace=1 taskset -c 1 "$R" --config "$work/router.yaml" >"$work/router.log" 2>&1 &
	rpid=$!
	for _ in $(seq 1 100); do curl -sf http://127.0.0.1:18392/readyz >/dev/null && break; sleep 0.1; done
fi
tck=$(getconf CLK_TCK)
read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$rpid/stat")
taskset -c 0 "$work/mcpload" --url http://127.0.0.1:18391/mcp --sessions 32 --duration "$((DUR + 6))s" --warmup 1s \
	--tool "$tool" --args '{"text":"hello"}' --quiet --json "$work/load.json" >/dev/null 2>&1 &
lpid=$!
sleep 2
if [ "$R" = haproxy ]; then
	sleep "$DUR"
else
	admin=http://127.0.0.1:18392
	curl -s $admin/metrics >"$work/m0"
	curl -s $admin/debug/pprof/allocs >"$work/a0.pprof"
	gc0=$(grep -c '^gc ' "$work/router.log" || true)
	curl -s "$admin/debug/pprof/profile?seconds=$DUR" >"$OUT.pprof"
	gc1=$(grep -c '^gc ' "$work/router.log" || true)
	curl -s $admin/debug/pprof/allocs >"$work/a1.pprof"
	curl -s $admin/metrics >"$work/m1"
fi
if command -v strace >/dev/null; then
	timeout -s INT 3 strace -c -f -p "$rpid" -o "$work/strace.txt" >/dev/null 2>&1 || true
fi
wait "$lpid"
read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$rpid/stat")
python3 - "$work/load.json" $((u1 - u0)) $((s1 - s0)) "$tck" "$work/strace.txt" <<'PY'
import json, os, sys
f, ut, st, tck, trace = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
r = json.load(open(f))
calls = r["requests"] + r["excluded_requests"]
print("calls/s %.0f  errors %d  p99 %.2f ms  proxy CPU per call %.1f µs (user %.1f, system %.1f)"
      % (r["throughput_rps"], r["errors"], r["latency_us"]["p99"] / 1000,
         (ut + st) / tck / calls * 1e6, ut / tck / calls * 1e6, st / tck / calls * 1e6))
if os.path.exists(trace):
    counts = {}
    for line in open(trace):
        p = line.split()
        if len(p) >= 5 and p[-1].isidentifier() and p[3].isdigit():
            counts[p[-1]] = (int(p[3]), int(p[4]) if len(p) == 6 else 0)
    # one write (haproxy: sendto) to the backend and one to the client per call
    writes = sum(counts.get(k, (0, 0))[0] for k in ("write", "sendto", "writev", "sendmsg"))
    if writes:
        per = writes / 2
        print("system calls per call (strace, calls = writes / 2): " + ", ".join(
            "%s %.2f%s" % (k, n / per, " (%.2f failed)" % (e / per) if e else "")
            for k, (n, e) in sorted(counts.items(), key=lambda kv: -kv[1][0])[:6]))
PY
if [ "$R" != haproxy ]; then
	allocs() { go tool pprof -sample_index="$1" -base "$work/a0.pprof" -top "$work/a1.pprof" 2>/dev/null || true; }
	allocs alloc_objects >"$work/objects.txt"
	allocs alloc_space >"$work/space.txt"
	{ sed -n 1,25p "$work/objects.txt"; sed -n 1,8p "$work/space.txt"; } >"$OUT.allocs.txt"
	total() { awk '/^Showing nodes/ {print $(NF-1); exit}' "$1"; }
	calls() { awk '/^mcprouter_requests_total/ {s += $NF} END {printf "%d", s}' "$1"; }
	echo "allocations over the profile's ${DUR}s: $(total "$work/objects.txt") objects, $(total "$work/space.txt") for $(($(calls "$work/m1") - $(calls "$work/m0"))) calls; $((gc1 - gc0)) collections"
	go tool pprof -top -nodecount=25 "$R" "$OUT.pprof" 2>/dev/null | sed -n '4,40p'
fi
