#!/usr/bin/env bash
# How long goroutines waited to run, from a runtime execution trace (for instance the
# router's, from its admin listener: curl ADMIN/debug/pprof/trace?seconds=3 > T, or
# TRACE=1 with bench/scripts/tail-open.sh). Prints the share of the trace the P was idle,
# the runnable waits grouped by why each goroutine had last stopped running (woken by the
# network, after a runtime.Gosched, woken by a channel or select...), and the waits of
# goroutines woken by the network or a Gosched bucketed by how long after the start of
# the latest GC cycle they became runnable: what a collection does to the queue.
#
#   bash bench/scripts/trace-waits.sh T
#
# Reads `go tool trace -d=parsed` (Go 1.23 or later); a 3 s trace of a busy router takes
# about half a minute.
set -euo pipefail
go tool trace -d=parsed "$1" 2>/dev/null | python3 -c '
import re, sys
gst = re.compile(r"StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+) Reason=\"([^\"]*)\"")
pst = re.compile(r"StateTransition Time=(\d+) ProcID=(\d+) (\w+)->(\w+)")
gcb = re.compile(r"RangeBegin Time=(\d+) Name=\"GC concurrent mark phase\"")
last, since = {}, {}
byreason, bygc = {}, {}
gc = None
idle_from, idle, t0, t1 = None, 0, None, None
edges = [(0, 10e6, "0-10 ms after a GC start"), (10e6, 50e6, "10-50 ms"), (50e6, 200e6, "50-200 ms"),
         (200e6, float("inf"), "later (or before the first)")]
for line in sys.stdin:
    if "GC concurrent mark phase" in line:
        m = gcb.search(line)
        if m:
            gc = int(m.group(1))
        continue
    if "StateTransition" not in line:
        continue
    m = gst.search(line)
    if not m:
        m = pst.search(line)
        if m:
            t = int(m.group(1))
            if m.group(4) == "Idle":
                idle_from = t
            elif m.group(3) == "Idle" and idle_from is not None:
                idle += t - idle_from
                idle_from = None
        continue
    t, g, a, b, why = int(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)
    t0 = t if t0 is None else t0
    t1 = t
    if a == "Running" and b in ("Waiting", "Runnable"):
        last[g] = why or ("preempted" if b == "Runnable" else "other")
    if b == "Runnable":
        since[g] = t
    elif a == "Runnable" and b == "Running" and g in since:
        r0 = since.pop(g)
        why = last.get(g, "new")
        byreason.setdefault(why, []).append(t - r0)
        if why in ("network", "runtime.Gosched"):
            d = r0 - gc if gc is not None else float("inf")
            for lo, hi, name in edges:
                if lo <= d < hi:
                    bygc.setdefault(name, []).append(t - r0)
def line(name, v):
    v.sort()
    n = len(v)
    q = lambda p: v[min(n - 1, int(p * n))] / 1e3
    print("  %-28s n=%8d  mean %8.1f µs  p50 %8.1f  p90 %8.1f  p99 %9.1f  max %9.1f" % (name, n, sum(v) / n / 1e3, q(.5), q(.9), q(.99), v[-1] / 1e3))
if t0 is None:
    sys.exit("no goroutine events in the trace")
print("trace %.2f s, P idle %.1f%%" % ((t1 - t0) / 1e9, 100 * idle / max(t1 - t0, 1)))
print("runnable waits by why the goroutine last stopped:")
for k, v in sorted(byreason.items(), key=lambda kv: -sum(kv[1])):
    line(k, v)
print("woken by the network or after a Gosched, by time since the latest GC start:")
for _, _, name in edges:
    if name in bygc:
        line(name, bygc[name])
'
