package fleet

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// slowListConn answers its first resources/list with an error, as a backend too slow to
// answer it within the timeout at start; everything else as scriptedConn.
type slowListConn struct {
	*scriptedConn
	failed atomic.Bool
}

func (c *slowListConn) Send(ctx context.Context, msg []byte) error {
	var m codec.Message
	if err := codec.Scan(msg, &m); err == nil && string(m.Method) == "resources/list" && c.failed.CompareAndSwap(false, true) {
		c.sink.Message(codec.AppendError(nil, m.ID, codec.CodeInternalError, "busy", nil))
		return nil
	}
	return c.scriptedConn.Send(ctx, msg)
}

// TestCatalogRetriesAFailedFirstRead: the first read of a backend's lists fails part
// way (tools read, resources not): the tools serve at once, and the read is tried again,
// so that the resources appear without waiting for the backend to announce a change.
func TestCatalogRetriesAFailedFirstRead(t *testing.T) {
	up := &slowListConn{scriptedConn: &scriptedConn{got: make(chan []byte, 16), done: make(chan struct{})}}
	f := New(Config{HealthInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Backends: []BackendConfig{{
		Name: "a", Prefix: "a", Timeout: time.Second, // the retry waits as long
		Dialers: []Dialer{{Addr: "scripted", Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			up.sink = sink
			return up, nil
		}}},
	}}})
	f.Start(time.Minute)
	t.Cleanup(f.Close)
	if _, ok := f.catalog.load().tools["a"+Separator+"echo"]; !ok {
		t.Fatal("the tools read before the failure are not served")
	}
	if !up.failed.Load() {
		t.Fatal("the first resources/list did not fail")
	}
	testwait.For(t, "the resources to be read again", time.Minute, func() bool { return f.catalog.load().resources["file:///r"] != nil })
}
