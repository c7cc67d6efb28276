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

// TestTracedInputRounds: a 2025 client's traced tools/call to a 2026-07-28 backend that
// answers input_required: the router's retry with the answers is a backend call of its
// own, so the request has one client span per upstream round, each a child of the
// server span with the backend and instance, and each round's bytes carry their own
// span's traceparent.
func TestTracedInputRounds(t *testing.T) {
	const client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	defer tp.Shutdown(t.Context())
	f, up := newScriptedFleet(t, time.Minute, true)
	f.SetObserver(tracing.Observe(nil))
	fc := attachTracedClient(t, f, up, tracing.NewFromProvider(tp, 1))

	fc.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"a__echo","_meta":{"traceparent":"` + client + `"}}}`)
	var parents []string // the traceparent each round's bytes carry
	for round, answer := range []string{`{"resultType":"input_required","requestState":"s1"}`, `{"content":[]}`} {
		m := fc.upstream()
		if round == 1 && string(codec.Member(m.Params, "requestState")) != `"s1"` {
			t.Fatalf("the retry is %s, want the requestState echoed", m.Params)
		}
		parents = append(parents, string(codec.Member(codec.Member(m.Params, "_meta"), "traceparent")))
		fc.answer(m.ID, answer)
	}
	if r := fc.read(); r.Kind != codec.KindResult {
		t.Fatalf("client got %v, want the result", r.Kind)
	}
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want the request's and one backend call per round", len(spans))
	}
	srv := spans[2]
	if srv.Parent.SpanID().String() != "b7ad6b7169203331" {
		t.Fatalf("server span's parent %v, want the client's", srv.Parent.SpanID())
	}
	for i, call := range spans[:2] {
		if call.Parent.SpanID() != srv.SpanContext.SpanID() || call.SpanKind.String() != "client" {
			t.Errorf("round %d: a %v span under %v, want a client span under the server span %v", i, call.SpanKind, call.Parent.SpanID(), srv.SpanContext.SpanID())
		}
		attrs := map[string]string{}
		for _, kv := range call.Attributes {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if attrs[string(tracing.BackendKey)] != "a" || attrs[string(tracing.InstanceKey)] != "scripted" || attrs[string(tracing.OutcomeKey)] != "ok" {
			t.Errorf("round %d: attributes %v, want the backend, its instance and the outcome", i, attrs)
		}
		if want := `"00-0af7651916cd43dd8448eb211c80319c-` + call.SpanContext.SpanID().String() + `-01"`; parents[i] != want {
			t.Errorf("round %d: the backend got traceparent %s, want %s", i, parents[i], want)
		}
	}
}
