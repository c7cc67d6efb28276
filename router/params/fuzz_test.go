package params

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// fuzzSeeds are messages for the fuzz targets: the benchmarks', the specification's
// examples, and some wrong ones.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, c := range benchCases {
		seeds = append(seeds, []byte(`{"jsonrpc":"2.0","id":1,"method":"`+c.method+`","params":`+c.params+`}`))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "2026-07-28", "examples", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"x"},"argument":{"name":"a","value":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"maxTokens":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2.5e1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"n\u0061me":"x","_meta":{"progressToken":[]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"mode":"url","message":"m","url":"u","elicitationId":"e"}}`,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// addFuzzSeeds adds each of fuzzSeeds in every revision, for targets that take a
// message and a revision.
func addFuzzSeeds(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		for rev := range len(revisions) {
			f.Add(s, uint8(rev))
		}
	}
}

// fuzzMessage is the request or notification a target checks: msg scanned, its method
// unescaped, and the revision rev picks; ok is false for bytes the codec rejects and for
// replies, which the targets pass over.
func fuzzMessage(msg []byte, rev uint8) (m codec.Message, method []byte, revision string, ok bool) {
	if codec.Scan(msg, &m) != nil || (m.Kind != codec.KindRequest && m.Kind != codec.KindNotification) {
		return m, nil, "", false
	}
	method = m.Method
	if m.Flags&codec.MethodEscaped != 0 {
		method, _ = codec.Unquote(nil, m.Method)
	}
	return m, method, revisions[int(rev)%len(revisions)], true
}

// FuzzValidate: for any message codec.Scan accepts, in any revision, Validate neither
// panics nor allocates on success, its error is an *Error for -32602 that names a member
// under params, never "invalid JSON" (the bytes were scanned), and it agrees with the
// codec's routing peeks: valid tools/call and prompts/get params have a string name,
// valid resources/* params a string uri.
func FuzzValidate(f *testing.F) {
	addFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, msg []byte, rev uint8) {
		m, method, revision, ok := fuzzMessage(msg, rev)
		if !ok {
			return
		}
		err := Validate(revision, method, m.Params)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalidParams) || e.Code() != codec.CodeInvalidParams {
				t.Fatalf("error %#v is not an *Error", err)
			}
			if !strings.HasPrefix(e.Path, "params") || e.Reason == "" || e.Reason == reasonInvalid {
				t.Fatalf("error %q", err)
			}
			return
		}
		switch string(method) {
		case "tools/call", "prompts/get":
			if m.Name == nil && Known(revision, method) {
				t.Fatalf("%s valid without a string name: %s", method, m.Params)
			}
		case "resources/read", "resources/subscribe", "resources/unsubscribe":
			if m.URI == nil && Known(revision, method) {
				t.Fatalf("%s valid without a string uri: %s", method, m.Params)
			}
		}
	})
}

// FuzzValidateRaw: params bytes nobody scanned (Validate's contract says they were, but
// a mistake there must not crash the router) end in nil or an *Error, without a panic.
func FuzzValidateRaw(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		var m codec.Message
		if codec.Scan(s, &m) == nil {
			f.Add(m.Params, string(m.Method), uint8(3))
		}
	}
	f.Add([]byte(`{"uri":`), "resources/read", uint8(0))
	f.Add([]byte(`"`), "tools/call", uint8(4))
	f.Fuzz(func(t *testing.T, params []byte, method string, rev uint8) {
		err := Validate(revisions[int(rev)%len(revisions)], method, params)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(e.Path, "params") {
				t.Fatalf("error %#v", err)
			}
		}
	})
}
