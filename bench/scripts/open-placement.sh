#!/usr/bin/env bash
# The proxy's CPU per call under open load with its backend on the proxy's CPU and on the
# load generator's: does sharing a CPU with the backend make each call dearer? mcprouter
# (default configuration) and haproxy (one thread, keep-alive both sides, as bench/compare
# runs it) in front of mcpbackend; the proxy on CPU 1, the backend on CPU 1 or CPU 0,
# mcpload (GOMAXPROCS=2) on CPU 0, 128 sessions at RATE calls/s for 6 s after 1 s of
# warm-up (RATE=0: a closed loop of 32 sessions instead, for comparison). Prints per run the calls/s, p99, and the proxy's and the backend's user and
# system time per call (from /proc, over the warm-up and the measured window).
#
#   bash bench/scripts/open-placement.sh            # ROUNDS=3 RATE=12000
#   ROUNDS=5 RATE=8000 bash bench/scripts/open-placement.sh
#   RATE=0 bash bench/scripts/open-placement.sh     # the closed loop
#
# Needs taskset and haproxy; without haproxy only the router runs.
set -euo pipefail
ROUNDS=${ROUNDS:-3} RATE=${RATE:-12000}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/mcprouter" ./cmd/mcprouter
go build -o "$work/mcpbackend" ./cmd/mcpbackend
go build -o "$work/mcpload" ./cmd/mcpload
printf 'global\n  nbthread 1\n  maxconn 8000\ndefaults\n  mode http\n  option http-keep-alive\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  timeout http-keep-alive 60s\nfrontend mcp\n  bind 127.0.0.1:18591\n  default_backend b\nbackend b\n  http-reuse always\n  server b 127.0.0.1:18590\n' >"$work/haproxy.conf"
printf 'admin: {listen: "off"}\n' >"$work/router.yaml"
tck=$(getconf CLK_TCK)
pacing=(--sessions 128 --rate "$RATE")
[ "$RATE" = 0 ] && pacing=(--sessions 32)
proxies=(router)
command -v haproxy >/dev/null && proxies+=(haproxy)

cpu() { awk '{print $14, $15}' "/proc/$1/stat"; } # utime stime, in ticks

one() { # proxy backend_cpu
	local proxy=$1 bcpu=$2 bepid pid tool
	taskset -c "$bcpu" "$work/mcpbackend" -listen 127.0.0.1:18590 >"$work/backend.log" 2>&1 &
	bepid=$!
	pids=("$bepid")
	for _ in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:18590/mcp && break; sleep 0.05; done
	if [ "$proxy" = haproxy ]; then
		taskset -c 1 haproxy -db -f "$work/haproxy.conf" >"$work/proxy.log" 2>&1 &
		pid=$! tool=echo
		for _ in $(seq 1 100); do
			code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18591/mcp || true)
			[ "$code" != 000 ] && [ "$code" != 503 ] && break
			sleep 0.05
		done
	else
		taskset -c 1 "$work/mcprouter" --listen 127.0.0.1:18591 --backend b=http://127.0.0.1:18590/mcp --config "$work/router.yaml" >"$work/proxy.log" 2>&1 &
		pid=$! tool=b__echo
		for _ in $(seq 1 300); do grep -q "mcprouter listening" "$work/proxy.log" && break; sleep 0.05; done
	fi
	pids+=("$pid")
	read -r u0 s0 < <(cpu "$pid")
	read -r bu0 bs0 < <(cpu "$bepid")
	GOMAXPROCS=2 taskset -c 0 "$work/mcpload" --url http://127.0.0.1:18591/mcp "${pacing[@]}" --duration 6s --warmup 1s \
		--tool "$tool" --args '{"text":"hello"}' --quiet --json "$work/load.json" >/dev/null 2>&1 || true
	read -r u1 s1 < <(cpu "$pid")
	read -r bu1 bs1 < <(cpu "$bepid")
	kill "$pid" "$bepid"
	wait "$pid" "$bepid" 2>/dev/null || true
	python3 - "$work/load.json" "$proxy" "$bcpu" "$tck" "$u0" "$s0" "$u1" "$s1" "$bu0" "$bs0" "$bu1" "$bs1" <<'PY'
import json, sys
f, proxy, bcpu = sys.argv[1:4]
tck, u0, s0, u1, s1, bu0, bs0, bu1, bs1 = map(float, sys.argv[4:13])
d = json.load(open(f))
n = d["requests"] + d.get("excluded_requests", 0)
us = lambda a, b: (b - a) / tck * 1e6 / n
print(f"{proxy:8s} backend on CPU {bcpu}: {d['throughput_rps']:7.0f} calls/s  p99 {d['latency_us']['p99'] / 1000:6.2f} ms  "
      f"proxy user {us(u0, u1):5.1f} system {us(s0, s1):5.1f} µs/call  backend user {us(bu0, bu1):5.1f} system {us(bs0, bs1):5.1f}")
PY
}

for _ in $(seq 1 "$ROUNDS"); do
	for p in "${proxies[@]}"; do
		for c in 1 0; do one "$p" "$c"; done
	done
done
