package natsbus

import "testing"

// TestShared: only a bus another process can reach is shared: an embedded server that
// opened no port is not, one that listens is, and so is a connection to it.
func TestShared(t *testing.T) {
	private := startBus(t, Config{})
	if private.Shared() {
		t.Error("a private embedded server counts as shared")
	}
	listening := startBus(t, withUser(Config{Listen: "127.0.0.1:0"}))
	if !listening.Shared() {
		t.Error("an embedded server that listens does not count as shared")
	}
	external := startBus(t, withUser(Config{URL: listening.ClientURL()}))
	if !external.Shared() {
		t.Error("an external NATS does not count as shared")
	}
}
