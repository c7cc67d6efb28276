#!/usr/bin/env bash
# A forwarded call's allocations and the collections they cause: one mcprouter build in
# front of mcpbackend (default configuration plus EXTRA, a YAML line appended under the
# backend), pinned as hop-profile.sh pins them, under mcpload (32 sessions, tools/call
# echo) for DUR seconds. Prints the router's heap allocations per call (the allocs
# profile's delta over the measured window, from its admin listener; its top sites are
# written to OUT.allocs.txt) and the collections GODEBUG=gctrace=1 logged in the window.
#
#   bash bench/scripts/hop-allocs.sh ROUTER_BIN OUT
#   DUR=8 EXTRA='    pipeline: 2' bash bench/scripts/hop-allocs.sh ROUTER_BIN OUT
set -euo pipefail
R=$1 OUT=$2 EXTRA=${EXTRA:-} DUR=${DUR:-8}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'kill "$bepid" "$rpid" 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/mcpbackend" ./cmd/mcpbackend
go build -o "$work/mcpload" ./cmd/mcpload
taskset -c 1 "$work/mcpbackend" -listen 127.0.0.1:18590 >"$work/backend.log" 2>&1 &
bepid=$!
printf 'listen: 127.0.0.1:18591\nadmin: {listen: 127.0.0.1:18592, pprof: true}\nbackends:\n  - name: b\n    url: http://127.0.0.1:18590/mcp\n%s\n' "$EXTRA" >"$work/router.yaml"
GODEBUG=gctrace=1 taskset -c 1 "$R" --config "$work/router.yaml" >"$work/router.log" 2>&1 &
rpid=$!
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:18592/readyz >/dev/null && break; sleep 0.1; done
taskset -c 0 "$work/mcpload" --url http://127.0.0.1:18591/mcp --sessions 32 --duration "$((DUR + 4))s" --warmup 1s \
	--tool b__echo --args '{"text":"hello"}' --quiet --json "$work/load.json" >/dev/null 2>&1 &
lpid=$!
sleep 2
curl -s http://127.0.0.1:18592/metrics >"$work/m0"
curl -s http://127.0.0.1:18592/debug/pprof/allocs >"$work/a0.pprof"
gc0=$(grep -c '^gc ' "$work/router.log" || true)
sleep "$DUR"
curl -s http://127.0.0.1:18592/debug/pprof/allocs >"$work/a1.pprof"
curl -s http://127.0.0.1:18592/metrics >"$work/m1"
gc1=$(grep -c '^gc ' "$work/router.log" || true)
wait "$lpid"
top() { go tool pprof -sample_index="$1" -base "$work/a0.pprof" -top "$work/a1.pprof" 2>/dev/null || true; }
top alloc_objects >"$work/objects.txt"
top alloc_space >"$work/space.txt"
{ sed -n 1,25p "$work/objects.txt"; sed -n 1,8p "$work/space.txt"; } >"$OUT.allocs.txt"
total() { awk '/^Showing nodes/ {print $(NF-1); exit}' "$1"; }
objs=$(total "$work/objects.txt") space=$(total "$work/space.txt")
calls() { awk '/^mcprouter_requests_total/ {s += $NF} END {printf "%d", s}' "$1"; }
n=$(($(calls "$work/m1") - $(calls "$work/m0")))
echo "window ${DUR}s: $n calls (requests_total), allocations $objs objects, $space; collections $((gc1 - gc0))"
grep '^gc ' "$work/router.log" | tail -n 3 || true
