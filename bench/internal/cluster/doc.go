// Package cluster runs a whole mcprouter deployment on loopback for the reliability
// benchmarks (bench/cmd/chaos, bench/cmd/soak): a NATS cluster of embedded servers
// joined by routes, each in its own process so that it can be killed; reference
// backends over HTTP (each replica behind a TCP proxy that can drop its connections)
// and over stdio; router instances on that NATS. Every process is a child of the
// command, signalled by its own PID only, and measured from /proc.
package cluster
