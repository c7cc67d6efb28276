#!/usr/bin/env bash
# The two revisions side by side through one mcprouter, in front of one mcpbackend that
# serves both (--eras both), in the same run, alternating the order every round:
#
#   calls:  mcpload steady tools/call echo as 2025-11-25 sessions, then as 2026-07-28
#           stateless requests (per-request _meta, Mcp-Method/Mcp-Name headers); prints
#           calls/s, p99 and the router's and the backend's CPU per call (utime+stime
#           from /proc over the warm-up and measured window, divided by every call made),
#           and mcpload's own (from time(1), when installed).
#   fanout: mcpload fan-out on memo://board with N subscribers holding 2025-11-25 GET
#           streams (resources/subscribe), then N holding 2026-07-28 subscriptions/listen
#           streams; prints deliveries/s, missing, p99 delivery and router CPU per delivery.
#
#   bash bench/scripts/eras-figures.sh                      # both parts
#   PART=calls ROUNDS=6 DUR=5s bash bench/scripts/eras-figures.sh
#   PART=fanout SUBS="500 2000" FRATE=10 bash bench/scripts/eras-figures.sh
#   ERA=2025 PART=calls bash bench/scripts/eras-figures.sh  # the router's upstream pinned to
#                              # a 2025 session (default auto: 2026-07-28, discovered)
#   BASE=<git revision> PART=calls bash bench/scripts/eras-figures.sh
#                              # before and after: a second router built from that revision
#                              # (git archive) runs beside this tree's, in front of the same
#                              # backend; every round measures both, "-base" runs are its
#   RATE=8000 PART=calls bash bench/scripts/eras-figures.sh
#                              # calls in open loop at that many calls/s (mcpload --rate), the
#                              # same for both revisions: in the closed loop a revision whose
#                              # client is slower gets fewer calls per wake-up of the router,
#                              # which raises the router's CPU per call whatever its own path
#                              # costs; at one rate below both maxima the two are compared at
#                              # the same offered load (calls_per_s then says the rate was met)
#   PROFILE=<dir> PART=calls bash bench/scripts/eras-figures.sh
#                              # a CPU profile of the router over each calls run, into
#                              # <dir>/<run>-r<round>.cpu (go tool pprof -top); the routers
#                              # then run their admin listener (pprof, and metrics recorded,
#                              # on PORT+3, the BASE router's on PORT+4), which costs both
#                              # revisions alike: quote the ratios of a run without it
#
# On a shared machine compare the rounds' ratios, not the absolute figures: the script
# ends with each ratio (2026-07-28 run ÷ 2025-11-25 run of the same round) per round
# and its median.
set -euo pipefail
PART=${PART:-all} ERA=${ERA:-auto} ROUNDS=${ROUNDS:-6} DUR=${DUR:-5s} SUBS=${SUBS:-500 2000} FRATE=${FRATE:-10} BASE=${BASE:-}
RATE=${RATE:-}
# The backend listens on PORT, the router on PORT+1, the BASE router on PORT+2.
PORT=${PORT:-18390} PROFILE=${PROFILE:-}
cd "$(dirname "$0")/../.."
if [ -n "$PROFILE" ]; then mkdir -p "$PROFILE" && PROFILE=$(cd "$PROFILE" && pwd); fi
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
go build -o "$work/mcpbackend" ./cmd/mcpbackend
go build -o "$work/mcprouter" ./cmd/mcprouter
go build -o "$work/mcpload" ./cmd/mcpload
if [ -n "$BASE" ]; then
	mkdir "$work/base"
	git archive "$BASE" | tar -x -C "$work/base"
	(cd "$work/base" && go build -o "$work/mcprouter-base" ./cmd/mcprouter)
fi
tck=$(getconf CLK_TCK)

# waitlog file marker: waits (bounded) for a process to say it is ready.
waitlog() {
	for _ in $(seq 1 200); do grep -q "$2" "$1" && return 0; sleep 0.05; done
	echo "not ready: $1" >&2
	exit 1
}

"$work/mcpbackend" --listen 127.0.0.1:$PORT --eras both --tick 1h >"$work/backend.log" 2>&1 &
bpid=$!
pids+=("$bpid")
waitlog "$work/backend.log" "mcpbackend listening"
# router name port: starts a router (mcprouter, or mcprouter-base) listening on port; with
# PROFILE its admin listener (pprof) is on port+2.
router() {
	local admin='{listen: "off"}'
	if [ -n "$PROFILE" ]; then admin="{listen: \"127.0.0.1:$(($2 + 2))\", pprof: true}"; fi
	cat >"$work/$1.yaml" <<YAML
listen: 127.0.0.1:$2
admin: $admin
stateless: on
# Every client comes from one loopback address: the per-address caps are lifted.
connections: {max_per_address: -1}
sessions: {init_rate: -1, max_per_client: -1}
backends:
  - {name: b, prefix: "", era: "$ERA", url: "http://127.0.0.1:$PORT/mcp"}
YAML
	"$work/$1" --config "$work/$1.yaml" >"$work/$1.log" 2>&1 &
	pids+=("$!")
	waitlog "$work/$1.log" "mcprouter listening"
}
router mcprouter $((PORT + 1))
rpid=${pids[-1]}
if [ -n "$BASE" ]; then
	router mcprouter-base $((PORT + 2))
	basepid=${pids[-1]}
fi
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
# io pid: the bytes the process read and wrote and its read and write system calls so
# far, "bytes calls" (from /proc/<pid>/io): per call, they show what a revision's larger
# or smaller messages cost the router, apart from its own code.
io() { awk '/^(rchar|wchar):/ {b += $2} /^sysc[rw]:/ {c += $2} END {printf "%.0f %.0f\n", b, c}' "/proc/$1/io"; }

# port_of name: the port of the router a run named name goes to (a name ending in -base:
# the router built from BASE).
port_of() { case $1 in *-base\ *) echo $((PORT + 2)) ;; *) echo $((PORT + 1)) ;; esac; }

# one name protocol [mcpload flags...]: one mcpload run, its figures on one line; a name
# ending in -base runs against the router built from BASE.
one() {
	local name=$1 proto=$2 c0 c1 b0 b1 i0 i1 pid=$rpid port
	shift 2
	port=$(port_of "$name")
	case $name in *-base\ *) pid=$basepid ;; esac
	c0=$(cpu "$pid") b0=$(cpu "$bpid") i0=$(io "$pid")
	local prof=
	if [ -n "$PROFILE" ] && [ "${name#calls}" != "$name" ]; then
		# The profile covers the measured window (the warm-up, 1s, is left out).
		(sleep 1 && curl -sf -o "$PROFILE/${name/ /-}.cpu" \
			"http://127.0.0.1:$((port + 2))/debug/pprof/profile?seconds=$((${DUR%s} - 1))") &
		prof=$!
	fi
	# mcpload's own CPU (user and system, from time(1) when there is one): the client's
	# share of the machine, which a closed loop's calls/s depends on too.
	local timed=()
	if [ -x /usr/bin/time ]; then timed=(/usr/bin/time -f '%U %S' -o "$work/$name.time"); fi
	"${timed[@]}" "$work/mcpload" --url http://127.0.0.1:$port/mcp --protocol "$proto" --quiet --json "$work/$name.json" "$@" >/dev/null 2>&1 || true
	if [ -n "$prof" ]; then wait "$prof" || true; fi
	c1=$(cpu "$pid") b1=$(cpu "$bpid") i1=$(io "$pid")
	python3 - "$name" "$work/$name.json" $((c1 - c0)) "$tck" $((b1 - b0)) "$work/$name.time" $i0 $i1 <<'PY'
import json, os, sys
name, f, ticks, tck, bticks, tf = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
io_bytes, io_calls = int(sys.argv[9]) - int(sys.argv[7]), int(sys.argv[10]) - int(sys.argv[8])
r = json.load(open(f))
cpu_us = ticks / tck * 1e6
load_s = sum(float(x) for x in open(tf).read().split()[:2]) if os.path.exists(tf) else None
fo = r.get("fanout")
if fo:
    d = fo["delivered"]
    print("%s subscribers=%d deliveries_per_s=%.0f missing=%d p50_ms=%.2f p99_ms=%.2f router_cpu_us_per_delivery=%.2f"
          % (name, fo["subscribers"], d / r["duration_s"], fo["missing"], fo["latency_us"]["p50"] / 1000,
             fo["latency_us"]["p99"] / 1000, cpu_us / max(d, 1)))
else:
    calls = r["requests"] + r["excluded_requests"]
    print("%s calls_per_s=%.0f errors=%d p99_ms=%.2f router_cpu_us_per_call=%.1f backend_cpu_us_per_call=%.1f%s"
          " router_bytes_per_call=%.0f router_syscalls_per_call=%.2f"
          % (name, r["throughput_rps"], r["errors"], r["latency_us"]["p99"] / 1000, cpu_us / max(calls, 1),
             bticks / tck * 1e6 / max(calls, 1),
             "" if load_s is None else " mcpload_cpu_us_per_call=%.1f" % (load_s * 1e6 / max(calls, 1)),
             io_bytes / max(calls, 1), io_calls / max(calls, 1)))
PY
}
# Every run's line also goes to lines.txt, for the ratios at the end.
exec > >(tee "$work/lines.txt")

# warm name protocol: three unmeasured seconds of the same calls before a measured run.
# fasthttp sizes the buffers it reads request bodies into from what it read before
# (it calibrates every 42,000 bodies, about 3 s here, and drops buffers above the 95th percentile), so a
# run right after the other revision's, whose bodies are shorter (2025) or longer
# (2026), would pay for new buffers and their collections (SESP, 2026-11-27: ~0.7 µs
# per call, 2026 runs only): each revision is measured in its own steady state.
# The calls' flags, the same for the warm-up and the measured run.
callflags=(--sessions 32 --tool echo --args '{"text":"hello"}' ${RATE:+--rate "$RATE"})
warm() {
	"$work/mcpload" --url "http://127.0.0.1:$(port_of "$1")/mcp" --protocol "$2" --quiet --duration 3s --warmup 0s \
		"${callflags[@]}" >/dev/null 2>&1 || true
}
calls() { # name protocol
	warm "$1" "$2"
	one "$1" "$2" --duration "$DUR" --warmup 1s "${callflags[@]}"
}
fanout() { # name protocol subscribers
	one "$1" "$2" --mode fanout --sessions "$3" --ramp 2s --duration "$DUR" --warmup 0s --timeout 30s \
		--fanout-uri memo://board --fanout-tool touch --fanout-args '{"uri":"memo://board"}' --fanout-rate "$FRATE"
}

for r in $(seq 1 "$ROUNDS"); do
	if [ "$PART" = all ] || [ "$PART" = calls ]; then
		for suffix in "" ${BASE:+-base}; do
			if [ $((r % 2)) = 1 ]; then calls "calls-2025$suffix r$r" 2025-11-25; calls "calls-2026$suffix r$r" 2026-07-28
			else calls "calls-2026$suffix r$r" 2026-07-28; calls "calls-2025$suffix r$r" 2025-11-25; fi
		done
	fi
	if [ "$PART" = all ] || [ "$PART" = fanout ]; then
		for n in $SUBS; do
			if [ $((r % 2)) = 1 ]; then fanout "get-$n r$r" 2025-11-25 "$n"; fanout "listen-$n r$r" 2026-07-28 "$n"
			else fanout "listen-$n r$r" 2026-07-28 "$n"; fanout "get-$n r$r" 2025-11-25 "$n"; fi
		done
	fi
done
python3 - "$work/lines.txt" <<'PY'
import statistics, sys
rows = {}  # round -> run name -> figures
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) > 2 and p[1].startswith("r"):
        rows.setdefault(p[1], {})[p[0]] = {k: float(v) for k, v in (x.split("=") for x in p[2:])}
def ratio(new, old, key):
    xs = [r[new][key] / r[old][key] for r in rows.values() if new in r and old in r and r[old][key] > 0]
    if xs:
        print("%-48s median %.2f  rounds %s" % ("%s/%s %s" % (new, old, key), statistics.median(xs), " ".join("%.2f" % x for x in xs)))
for key in ("calls_per_s", "router_cpu_us_per_call", "backend_cpu_us_per_call", "mcpload_cpu_us_per_call", "p99_ms",
            "router_bytes_per_call", "router_syscalls_per_call"):
    ratio("calls-2026", "calls-2025", key)
    ratio("calls-2026-base", "calls-2025-base", key)
# With BASE: each revision's call through this tree's router against the base's.
for era in ("2026", "2025"):
    ratio("calls-" + era, "calls-%s-base" % era, "router_cpu_us_per_call")
for n in sorted({k.split("-")[1] for r in rows.values() for k in r if k.startswith("get-")}, key=int):
    for key in ("p50_ms", "p99_ms", "router_cpu_us_per_delivery"):
        ratio("listen-" + n, "get-" + n, key)
PY
