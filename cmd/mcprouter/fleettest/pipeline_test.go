package fleettest

import "testing"

// TestPipelinedBackends runs the concurrency and progress checks with the Streamable HTTP
// backends reached over pipelined connections (backends[].pipeline): many sessions with
// many calls in flight share two connections per backend, SSE replies carrying progress
// included, and every answer still reaches its own request.
func TestPipelinedBackends(t *testing.T) {
	f := startFleetWith(t, fleetOptions{pipeline: true})
	t.Run("same-ids", func(t *testing.T) { testSameIDsManySessions(t, f) })
	t.Run("progress", func(t *testing.T) { testProgress(t, f) })
}

// TestReplicaDownPipelined is TestReplicaDown with pipelined connections to the
// replicas: the calls queued on the dead replica's connections fail or move, and traffic
// and the subscription move to the other replica.
func TestReplicaDownPipelined(t *testing.T) {
	testReplicaDown(t, startFleetWith(t, fleetOptions{pipeline: true}))
}
