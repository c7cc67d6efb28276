// Package scale runs the 100,000-session benchmark of issue 15 on one machine: router
// processes joined by NATS (the first runs the embedded server, listening; the others
// join it), the reference backend over HTTP, and several `mcpload hold` processes that
// open the sessions, each holding a GET stream (or, on 2026-07-28, a
// subscriptions/listen stream) subscribed to one resource. No process holds more than
// about 15,000 connections: a process may hold at most 20,000 descriptors here, a hard
// limit, and each held session is one connection at both ends. The loaders connect from
// several loopback source addresses (127.0.0.2 ...) to get past the ephemeral ports of
// one.
//
// It measures, per process and for the whole: resident memory per idle session above
// the empty router (VmRSS before and after), sessions opened per second, one resource
// update's arrival at every session (p50, p99, max from the trigger call), a small
// closed loop of tools/call answered throughout the opening and the update (errors,
// p99), and the CPU time per delivery of the routers against the loaders' (utime +
// stime from /proc over the update).
//
// Every process is a child of the command, started on loopback, ended by its PID, and
// killed with the command whatever ends it.
package scale
