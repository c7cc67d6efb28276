// Package cluster tests many mcprouter instances on one NATS cluster: resource updates
// fanned out across instances, one upstream subscription per URI in the whole cluster,
// sessions that survive their instance, and NATS node restarts. It holds only tests.
package cluster
