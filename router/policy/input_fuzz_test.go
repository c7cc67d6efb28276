package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/mcprouter/mcprouter/codec"
)

// FuzzInput checks the CEL input builder against encoding/json: for any bytes it does
// not panic; for any request the codec accepts, the method, tool, prompt and URI are
// what encoding/json reads, and the arguments are encoding/json's value (integers as
// ints, other numbers as doubles), or an error only when encoding/json shows a reason
// (a repeated member, arguments that are not an object).
func FuzzInput(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "input", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var in Input
		err := ParseInput(raw, &in)
		var m codec.Message
		if codec.Scan(raw, &m) != nil || (m.Kind != codec.KindRequest && m.Kind != codec.KindNotification) {
			if err == nil {
				t.Fatal("accepted what the codec refuses")
			}
			return
		}
		// Members by their exact names (a struct would match names case-insensitively).
		var top map[string]json.RawMessage
		if json.Unmarshal(raw, &top) != nil {
			t.Fatal("the codec accepted what encoding/json refuses")
		}
		var ref struct {
			Method string
			Params json.RawMessage
		}
		if json.Unmarshal(top["method"], &ref.Method) != nil {
			t.Fatal("method is not a string")
		}
		ref.Params = top["params"]
		if err != nil {
			if !errors.Is(err, ErrInput) || in.Method != MethodComplete && ref.Method != MethodComplete {
				t.Fatalf("refused %s: %v", raw, err)
			}
			if !hasDuplicate(ref.Params) {
				if _, isObj := refParams(ref.Params)["ref"].(map[string]any); isObj {
					t.Fatalf("completion refused without a reason: %v", err)
				}
			}
			return
		}
		if in.Method != ref.Method {
			t.Fatalf("method %q, encoding/json %q", in.Method, ref.Method)
		}
		params := refParams(ref.Params)
		str := func(v any) string { s, _ := v.(string); return s }
		var want Input
		switch ref.Method {
		case MethodToolsCall:
			want.Tool = str(params["name"])
		case MethodPromptsGet:
			want.Prompt = str(params["name"])
		case MethodRead, MethodSubscribe, methodUnsubscribe:
			want.URI = str(params["uri"])
		case MethodComplete:
			if r, ok := params["ref"].(map[string]any); ok {
				switch str(r["type"]) {
				case "ref/prompt":
					want.Prompt = str(r["name"])
				case "ref/resource":
					want.URI = str(r["uri"])
				}
			}
		}
		if in.Tool != want.Tool || in.Prompt != want.Prompt || in.URI != want.URI {
			t.Fatalf("tool %q prompt %q uri %q, encoding/json %q %q %q", in.Tool, in.Prompt, in.URI, want.Tool, want.Prompt, want.URI)
		}

		args, err := in.arguments()
		wantArgs := refArguments(params, ref.Method == MethodComplete)
		if err != nil {
			_, isObj := params["arguments"].(map[string]any)
			if !hasDuplicate(ref.Params) && (ref.Method == MethodComplete || isObj || params["arguments"] == nil) {
				t.Fatalf("arguments refused without a reason: %v", err)
			}
			return
		}
		if !sameValue(args, wantArgs) {
			t.Fatalf("arguments %v, encoding/json %v", args, wantArgs)
		}
	})
}

// refParams decodes params with encoding/json (numbers kept as json.Number).
func refParams(raw json.RawMessage) map[string]any {
	var p map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&p) != nil {
		return nil
	}
	return p
}

// refArguments is what mcp.arguments should be, from encoding/json's params.
func refArguments(params map[string]any, complete bool) map[string]any {
	if !complete {
		a, _ := params["arguments"].(map[string]any)
		if a == nil {
			a = map[string]any{}
		}
		return a
	}
	out := map[string]any{}
	if ctx, ok := params["context"].(map[string]any); ok {
		if ca, ok := ctx["arguments"].(map[string]any); ok {
			for k, v := range ca {
				out[k] = v
			}
		}
	}
	if arg, ok := params["argument"].(map[string]any); ok {
		if name, ok := arg["name"].(string); ok {
			if v, ok := arg["value"]; ok {
				out[name] = v
			}
		}
	}
	return out
}

// sameValue compares a CEL value with an encoding/json one.
func sameValue(v ref.Val, w any) bool {
	switch w := w.(type) {
	case map[string]any:
		m, ok := v.(traits.Mapper)
		if !ok || m.Size() != types.Int(len(w)) {
			return false
		}
		for k, wv := range w {
			mv, found := m.Find(types.String(k))
			if !found || !sameValue(mv, wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := v.(traits.Lister)
		if !ok || l.Size() != types.Int(len(w)) {
			return false
		}
		for i, wv := range w {
			if !sameValue(l.Get(types.Int(i)), wv) {
				return false
			}
		}
		return true
	case string:
		s, ok := v.(types.String)
		return ok && string(s) == w
	case json.Number:
		if i, err := strconv.ParseInt(string(w), 10, 64); err == nil {
			n, ok := v.(types.Int)
			return ok && int64(n) == i
		}
		f, err := strconv.ParseFloat(string(w), 64)
		d, ok := v.(types.Double)
		return ok && (float64(d) == f || err != nil)
	case bool:
		b, ok := v.(types.Bool)
		return ok && bool(b) == w
	case nil:
		return v == types.NullValue
	}
	return false
}

// hasDuplicate reports whether any object in raw repeats a member name.
func hasDuplicate(raw []byte) bool {
	d := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		keys  map[string]bool
		isObj bool
		inKey bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.isObj && top.inKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.inKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, isObj: true, inKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the enclosing object expects a key next.
		if len(stack) > 0 && stack[len(stack)-1].isObj {
			stack[len(stack)-1].inKey = true
		}
		if len(stack) == 0 {
			return false
		}
	}
}
