package params

import (
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// FuzzValidateJudged: for any message codec.Scan accepts, in any revision,
// ValidateJudged answers what Validate answers, with a fresh Judgement of its _meta and
// again with the one the first call left (which passes over a _meta it judged
// conforming), and it judges a _meta only when the params conform up to it.
func FuzzValidateJudged(f *testing.F) {
	addFuzzSeeds(f)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"_meta":{}}}`), uint8(4))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7,"io.modelcontextprotocol/clientCapabilities":{}},"name":"x"}}`), uint8(4))
	f.Fuzz(func(t *testing.T, msg []byte, rev uint8) {
		m, method, revision, ok := fuzzMessage(msg, rev)
		if !ok {
			return
		}
		want := errString(Validate(revision, method, m.Params))
		var j Judgement
		for round := range 3 {
			if got := errString(ValidateJudged(revision, method, m.Params, m.Meta, &j)); got != want {
				t.Fatalf("round %d: %q, Validate says %q", round, got, want)
			}
		}
		if j.rule.Load() != 0 && m.Meta == nil {
			t.Fatal("judged a _meta the message has not")
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestValidateJudged: a 2026-07-28 request's _meta is judged by the first request that
// carries it and passed over by the next, with no allocation; a _meta judged under the
// rule of requests is checked again under another rule (a notification's), and a
// _meta that does not conform is never judged.
func TestValidateJudged(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}`
	scan := func(s string) *codec.Message {
		var m codec.Message
		if err := codec.Scan([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	call := scan(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + meta + `}}`)
	var j Judgement
	if err := ValidateJudged("2026-07-28", call.Method, call.Params, call.Meta, &j); err != nil {
		t.Fatal(err)
	}
	judged := j.rule.Load()
	if judged == 0 {
		t.Fatal("a conforming _meta was not judged")
	}
	if !raceEnabled {
		if n := testing.AllocsPerRun(20, func() { _ = ValidateJudged("2026-07-28", call.Method, call.Params, call.Meta, &j) }); n != 0 {
			t.Errorf("%v allocs", n)
		}
	}
	// The judgement holds for the rule it was made under only: the _meta of a
	// notifications/cancelled has another, and a request without a name still fails.
	note := scan(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,` + meta + `}}`)
	if err := ValidateJudged("2026-07-28", note.Method, note.Params, note.Meta, &j); err != nil {
		t.Fatal(err)
	}
	if j.rule.Load() == judged {
		t.Error("a notification's _meta rule reused the request's judgement")
	}
	noName := scan(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `}}`)
	if err := ValidateJudged("2026-07-28", noName.Method, noName.Params, noName.Meta, &j); errString(err) != "params.name: required" {
		t.Errorf("without a name: %v", err)
	}
	var bad Judgement
	wrong := scan(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	for range 2 {
		if err := ValidateJudged("2026-07-28", wrong.Method, wrong.Params, wrong.Meta, &bad); err == nil {
			t.Fatal("a _meta without clientCapabilities passed")
		}
	}
	if bad.rule.Load() != 0 {
		t.Error("a _meta that does not conform was judged")
	}
}
