package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/upstream"
)

// TestStartGivesUp checks that Start returns after its wait when a backend never
// answers, with an empty catalog, and that Close then ends its maintainer.
func TestStartGivesUp(t *testing.T) {
	f := New(Config{Backends: []BackendConfig{{Name: "down", Dialers: []Dialer{{Addr: "nowhere",
		Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}}}}})
	f.Start(10 * time.Millisecond)
	if n := len(f.catalog.load().tools); n != 0 {
		t.Fatalf("%d tools from a backend that never answered", n)
	}
	f.Close()
}
