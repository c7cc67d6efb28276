package fleet

import (
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// TestNoticesToRequester checks that a backend's logging reaches the client whose
// request it belongs to: by the reply stream it came on, or as the only request in
// flight on the upstream session.
func TestNoticesToRequester(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	fc.send(`{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"a__echo"}}`)
	m := fc.upstream()
	logMsg := []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
	fc.up.sink.(upstream.RelatedSink).Related(m.ID, logMsg)
	if got := fc.read(); string(got.Method) != "notifications/message" {
		t.Fatalf("client got %s, want the log on its request's stream", got.Method)
	}
	fc.up.sink.Message(logMsg) // no stream named: the only request in flight
	if got := fc.read(); string(got.Method) != "notifications/message" {
		t.Fatalf("client got %s, want the log of its only request", got.Method)
	}
	fc.answer(m.ID, `{}`)
	if got := fc.read(); string(got.ID) != `"r"` {
		t.Fatalf("client got id %s, want \"r\"", got.ID)
	}
}

// TestRefreshSwapsCatalog checks what a list change leads to: the backend's lists are
// read again and the new catalog routes the new names.
func TestRefreshSwapsCatalog(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	tools := `{"tools":[{"name":"echo","inputSchema":{}},{"name":"sum","inputSchema":{}}]}`
	fc.up.tools.Store(&tools)
	b := fc.f.set.all()[0]
	before := fc.f.Stats.Refreshes.Load()
	// refresh returns at once when the start's own refresh is still winding up; that
	// one then reads the lists again, so the new catalog may land a moment later.
	fc.f.catalog.refresh(b, b.instances[0].conn.Load())
	testwait.For(t, "the refreshed catalog to route a__sum", 10*time.Second, func() bool {
		_, ok := fc.f.catalog.load().tools["a"+Separator+"sum"]
		return ok
	})
	if got := fc.f.Stats.Refreshes.Load(); got != before+1 {
		t.Fatalf("Refreshes = %d, want %d", got, before+1)
	}
	fc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__sum"}}`)
	if m := fc.upstream(); string(m.Name) != "sum" {
		t.Fatalf("backend got %s, want sum", m.Name)
	}
}

// TestClientCancelUnknown checks that a cancellation of nothing in flight is only
// consumed: no notice goes upstream, nothing is counted.
func TestClientCancelUnknown(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	fc.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`)
	fc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo"}}`)
	if m := fc.upstream(); string(m.Method) != "tools/call" {
		t.Fatalf("backend got %s first, want the call (no cancellation of an unknown id)", m.Method)
	}
	if got := fc.f.Stats.Cancelled.Load(); got != 0 {
		t.Fatalf("Cancelled = %d, want 0", got)
	}
}
