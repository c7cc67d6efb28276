#!/usr/bin/env bash
# Two mcprouter builds side by side in front of the same mcpbackend, driven by mcpload
# (32 sessions, tools/call echo), alternating the order every round. Prints, per run,
# calls/s, errors, p99 and the router's CPU per call (utime+stime from /proc, over the
# warm-up and measured window, divided by every call made in it).
#
#   bash bench/scripts/hop-before-after.sh OLD_ROUTER_BIN NEW_ROUTER_BIN
#   ROUNDS=10 DUR=4s RATE=12000 bash bench/scripts/hop-before-after.sh ...   # RATE: open loop
#   PIN=1 bash bench/scripts/hop-before-after.sh ...   # backend and routers on CPU 1, mcpload on CPU 0
#   SESSIONS=128 RATE=12000 bash bench/scripts/hop-before-after.sh ...   # default 32 sessions
#
# Build the old router from a worktree of the older commit (go build -o ... ./cmd/mcprouter).
set -euo pipefail
OLD=$1 NEW=$2
ROUNDS=${ROUNDS:-6} DUR=${DUR:-5s} RATE=${RATE:-0} SESSIONS=${SESSIONS:-32}
srv=() load=()
# mcpload keeps GOMAXPROCS=2 on its one CPU: with one P its readers wait for sysmon
# while its pacer sleeps (bench/RESULTS.md, "compare notes").
if [ "${PIN:-0}" = 1 ]; then srv=(taskset -c 1) load=(env GOMAXPROCS=2 taskset -c 0); fi
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
rpid=
trap 'kill "$bepid" $rpid 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/mcpbackend" ./cmd/mcpbackend
go build -o "$work/mcpload" ./cmd/mcpload
printf 'admin: {listen: "off"}\n' >"$work/router.yaml"
"${srv[@]}" "$work/mcpbackend" -listen 127.0.0.1:18190 >"$work/backend.log" 2>&1 &
bepid=$!
tck=$(getconf CLK_TCK)

run() { # name bin port
	local name=$1 bin=$2 port=$3 pid c0 c1
	"${srv[@]}" "$bin" --listen "127.0.0.1:$port" --backend b=http://127.0.0.1:18190/mcp --config "$work/router.yaml" >"$work/$name.log" 2>&1 &
	pid=$!
	rpid=$pid # for the exit trap, should the script end mid-run
	for _ in $(seq 1 300); do grep -q "mcprouter listening" "$work/$name.log" && break; sleep 0.05; done # a loaded machine: up to 15 s
	if ! c0=$(awk '{print $14+$15}' "/proc/$pid/stat" 2>/dev/null); then
		echo "$name run failed: the router exited: $(tail -n 1 "$work/$name.log")"
		return
	fi
	rm -f "$work/$name.json" # a failed run must not report the previous round's figures
	"${load[@]}" "$work/mcpload" --url "http://127.0.0.1:$port/mcp" --sessions "$SESSIONS" --rate "$RATE" --duration "$DUR" --warmup 1s \
		--tool b__echo --args '{"text":"hello"}' --quiet --json "$work/$name.json" >"$work/$name.load" 2>&1 || true
	c1=$(awk '{print $14+$15}' "/proc/$pid/stat" 2>/dev/null || echo "$c0")
	kill "$pid"; wait "$pid" 2>/dev/null || true
	[ -s "$work/$name.json" ] || echo "$name: mcpload: $(tail -n 1 "$work/$name.load")"
	python3 - "$name" "$work/$name.json" $((c1 - c0)) "$tck" <<'PY'
import json, sys
name, f, ticks, tck = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
try:
    r = json.load(open(f))
except (OSError, ValueError) as e:  # mcpload failed (a starved run): say so, keep going
    print("%s run failed: %s" % (name, e))
    sys.exit(0)
calls = r["requests"] + r["excluded_requests"]
print("%s rps=%.0f errors=%d p99_ms=%.2f router_cpu_us_per_call=%.1f"
      % (name, r["throughput_rps"], r["errors"], r["latency_us"]["p99"] / 1000, ticks / tck / calls * 1e6))
PY
}

for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then run old "$OLD" 18191; run new "$NEW" 18192
	else run new "$NEW" 18192; run old "$OLD" 18191; fi
done
