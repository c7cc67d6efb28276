package fleet

import (
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/tracing"
)

// TestTracedForward: a traced tools/call reaches a backend without headers (the
// scripted connection, as a stdio one) with the backend call span's traceparent in its
// _meta in place of the client's, the rest of _meta kept (the progress token still
// rewritten to the wire id); the backend's error code is on both spans. For a 2025
// upstream session and a 2026-07-28 backend (whose _meta the router also fills).
func TestTracedForward(t *testing.T) {
	const client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, modern := range []bool{false, true} {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
		tr := tracing.NewFromProvider(tp, 1)
		f, up := newScriptedFleet(t, time.Minute, modern)
		f.SetObserver(tracing.Observe(nil))
		fc := attachTracedClient(t, f, up, tr)

		fc.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"a__echo","_meta":{"progressToken":"p1","traceparent":"` + client + `"}}}`)
		m := fc.upstream()
		meta := codec.Member(m.Params, "_meta")
		got := string(codec.Member(meta, "traceparent"))
		if string(m.ProgressToken) != string(m.ID) {
			t.Errorf("modern %v: progress token %s, want the wire id %s", modern, m.ProgressToken, m.ID)
		}
		fc.up.sink.Message(codec.AppendError(nil, m.ID, -32042, "no", nil))
		if r := fc.read(); r.Kind != codec.KindError {
			t.Fatalf("modern %v: client got %v, want the error", modern, r.Kind)
		}
		spans := exp.GetSpans()
		if len(spans) != 2 {
			t.Fatalf("modern %v: %d spans, want the request's and the backend call's", modern, len(spans))
		}
		call, srv := spans[0], spans[1]
		if srv.Parent.SpanID().String() != "b7ad6b7169203331" || call.Parent.SpanID() != srv.SpanContext.SpanID() {
			t.Errorf("modern %v: span tree %v <- %v <- %v", modern, client, srv.SpanContext.SpanID(), call.SpanContext.SpanID())
		}
		want := `"00-0af7651916cd43dd8448eb211c80319c-` + call.SpanContext.SpanID().String() + `-01"`
		if got != want {
			t.Errorf("modern %v: backend got traceparent %s in %s, want %s", modern, got, meta, want)
		}
		if modern && !strings.Contains(string(meta), "io.modelcontextprotocol/protocolVersion") {
			t.Errorf("modern: the 2026-07-28 _meta members are gone: %s", meta)
		}
		for _, s := range spans {
			found := false
			for _, kv := range s.Attributes {
				if kv.Key == "rpc.response.status_code" && kv.Value.AsString() == "-32042" {
					found = true
				}
			}
			if !found {
				t.Errorf("modern %v: span %q lacks the error code: %v", modern, s.Name, s.Attributes)
			}
		}
		tp.Shutdown(t.Context())
	}
}
