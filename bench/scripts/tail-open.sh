#!/usr/bin/env bash
# The open-loop tail (issue 15): direct, haproxy and mcprouter in front of one mcpbackend,
# each at the same offered rate, in interleaved rounds, as bench/cmd/compare's open-loop
# section runs them: every server pinned to CPU 1, mcpload pinned to CPU 0 with
# GOMAXPROCS=2, 128 sessions, tools/call echo, latency from intended send times.
# Prints one line per run (p50, p90, p99, p99.9, CPU per call of the proxy, its user and
# system parts, and of the backend, server CPU busy) and, per round, the p99 each proxy
# adds over direct.
#
#   bash bench/scripts/tail-open.sh RATE [ROUNDS] [TARGETS]
#   ROUTER=path/to/mcprouter DUR=4 bash bench/scripts/tail-open.sh 16000 3 direct,haproxy,router
#   BCPU=0 bash bench/scripts/tail-open.sh 12000 3 haproxy,router   # the backend on mcpload's CPU
#   SESS=32 bash bench/scripts/tail-open.sh 0 2 haproxy,router      # RATE 0: a closed loop
#
# BCPU is the CPU mcpbackend runs on (default 1, the proxies'): with BCPU=0 the proxy has
# CPU 1 to itself, which tells what sharing a CPU with the backend costs it (OPENPLACE in
# bench/RESULTS.md).
#
# Targets: direct, haproxy, router (ROUTER, default: built from this tree) and router2
# (ROUTER2, a second build to compare with, e.g. the tree before a change). RENV and
# RENV2 are environment settings for the two router processes (e.g. RENV=GOGC=400).
# TRACE=1 also takes a 3 s runtime execution trace of each router in round 1 (written to
# OUTDIR/TARGET.trace), PROF=1 a 3 s CPU profile instead (OUTDIR/TARGET.pprof); the
# routers' logs (with RENV=GODEBUG=gctrace=1, the GC's lines) are kept there too.
set -euo pipefail
RATE=$1 ROUNDS=${2:-2} TARGETS=${3:-direct,haproxy,router}
DUR=${DUR:-4} SESS=${SESS:-128} OUTDIR=${OUTDIR:-$(mktemp -d)} BCPU=${BCPU:-1}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
go build -o "$work/mcpbackend" ./cmd/mcpbackend
go build -o "$work/mcpload" ./cmd/mcpload
ROUTER=${ROUTER:-$work/mcprouter}
[ -x "$ROUTER" ] || go build -o "$ROUTER" ./cmd/mcprouter
taskset -c "$BCPU" "$work/mcpbackend" -listen 127.0.0.1:18490 >"$work/backend.log" 2>&1 &
bepid=$!
pids+=("$bepid")
declare -A port pid tool
port[direct]=18490 pid[direct]=$bepid tool[direct]=echo
start_router() { # name binary port admin env
	printf 'listen: 127.0.0.1:%s\nadmin: {listen: 127.0.0.1:%s, pprof: true}\nbackends:\n  - name: backend\n    url: http://127.0.0.1:18490/mcp\n' "$3" "$4" >"$work/$1.yaml"
	env $5 taskset -c 1 "$2" --config "$work/$1.yaml" >"$OUTDIR/$1.log" 2>&1 &
	pid[$1]=$! port[$1]=$3 tool[$1]=backend__echo
	pids+=("$!")
	for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$4/readyz" >/dev/null && break; sleep 0.1; done
}
for t in ${TARGETS//,/ }; do
	case $t in
	haproxy)
		printf 'global\n  nbthread 1\n  maxconn 8000\ndefaults\n  mode http\n  option http-keep-alive\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  timeout http-keep-alive 60s\nfrontend mcp\n  bind 127.0.0.1:18491\n  default_backend b\nbackend b\n  http-reuse always\n  server b 127.0.0.1:18490\n' >"$work/haproxy.conf"
		taskset -c 1 haproxy -db -f "$work/haproxy.conf" >"$work/haproxy.log" 2>&1 &
		pid[haproxy]=$! port[haproxy]=18491 tool[haproxy]=echo
		pids+=("$!")
		for _ in $(seq 1 100); do
			code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18491/mcp || true)
			[ "$code" != 000 ] && [ "$code" != 503 ] && break
			sleep 0.1
		done
		;;
	router) start_router router "$ROUTER" 18492 18493 "${RENV:-}" ;;
	router2) start_router router2 "${ROUTER2:?ROUTER2 names the second build}" 18494 18495 "${RENV2:-}" ;;
	direct) ;;
	*) echo "unknown target $t" >&2; exit 2 ;;
	esac
done
echo "# $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg), rate $RATE/s, $SESS sessions, ${DUR}s per run, $ROUNDS rounds, backend on CPU $BCPU"
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
usersys() { awk '{print $14, $15}' "/proc/$1/stat"; }
busy() { awk '/^cpu1 /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
order=(${TARGETS//,/ })
for r in $(seq 1 "$ROUNDS"); do
	list=("${order[@]}")
	if [ $((r % 2)) -eq 0 ]; then list=($(printf '%s\n' "${order[@]}" | tac)); fi
	for t in "${list[@]}"; do
		b0=$(cpu "$bepid")
		read -r pu0 ps0 < <(usersys "${pid[$t]}")
		read -r bu0 bt0 < <(busy)
		GOMAXPROCS=2 taskset -c 0 "$work/mcpload" --url "http://127.0.0.1:${port[$t]}/mcp" --sessions "$SESS" \
			--duration "${DUR}s" --warmup 1s --tool "${tool[$t]}" --args '{"text":"hello"}' --rate "$RATE" \
			--quiet --json "$OUTDIR/$t.$r.json" >/dev/null 2>&1 &
		lpid=$!
		if [ "$r" = 1 ] && [ "$t" != direct ] && [ "$t" != haproxy ] && [ -n "${TRACE:-}${PROF:-}" ]; then
			sleep 2
			adm=$((port[$t] + 1))
			if [ -n "${TRACE:-}" ]; then
				curl -s "http://127.0.0.1:$adm/debug/pprof/trace?seconds=3" >"$OUTDIR/$t.trace"
			else
				curl -s "http://127.0.0.1:$adm/debug/pprof/profile?seconds=3" >"$OUTDIR/$t.pprof"
			fi
		fi
		wait "$lpid"
		b1=$(cpu "$bepid")
		read -r pu1 ps1 < <(usersys "${pid[$t]}")
		read -r bu1 bt1 < <(busy)
		echo "$t $r $((pu1 + ps1 - pu0 - ps0)) $((b1 - b0)) $((bu1 - bu0)) $((bt1 - bt0)) $((pu1 - pu0)) $((ps1 - ps0))" >>"$OUTDIR/cpu.txt"
	done
done
python3 - "$OUTDIR" "$(getconf CLK_TCK)" "$ROUNDS" "${order[@]}" <<'PY'
import json, sys, statistics
out, tck, rounds, targets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
cpu = {}
for line in open(out + "/cpu.txt"):
    t, r, p, b, bu, bt, pu, ps = line.split()
    cpu[(t, int(r))] = (int(p), int(b), int(bu), int(bt), int(pu), int(ps))
def ms(us): return "%.2fms" % (us / 1000)
p99 = {}
for r in range(1, rounds + 1):
    for t in targets:
        j = json.load(open("%s/%s.%d.json" % (out, t, r)))
        l = j["latency_us"]
        calls = j["requests"] + j["excluded_requests"]
        p, b, bu, bt, pu, ps = cpu[(t, r)]
        per = lambda ticks: ticks / tck / calls * 1e6
        proxy = "" if t == "direct" else " proxy %.1fµs (user %.1f, system %.1f) +" % (per(p), per(pu), per(ps))
        backend = per(p if t == "direct" else b)
        p99[(t, r)] = l["p99"]
        print("%-8s r%d %6.0f/s err %d  p50 %s p90 %s p99 %s p99.9 %s  CPU/call%s backend %.1fµs  busy %.0f%%"
              % (t, r, j["throughput_rps"], j["errors"], ms(l["p50"]), ms(l["p90"]), ms(l["p99"]),
                 ms(l.get("p999", 0)), proxy, backend, 100 * bu / max(bt, 1)))
for t in targets:
    if t == "direct" or "direct" not in targets: continue
    adds = [p99[(t, r)] - p99[("direct", r)] for r in range(1, rounds + 1)]
    print("%s adds to p99 over direct: per round %s, median %s" % (t, ", ".join(ms(a) for a in adds), ms(statistics.median(adds))))
PY
echo "# outputs in $OUTDIR"
