package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// addCorpus seeds a fuzz target with every corpus file, whole and (for batches) element
// by element.
func addCorpus(f *testing.F) {
	for _, path := range corpusFiles(f) {
		in, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(in)
		if elems, err := SplitBatch(in, nil); err == nil {
			for _, e := range elems {
				f.Add(e)
			}
		}
	}
}

// nestingDepth returns the deepest bracket nesting of a valid JSON text, counted
// independently of the scanner.
func nestingDepth(in []byte) int {
	depth, deepest := 0, 0
	inStr, esc := false, false
	for _, c := range in {
		switch {
		case esc:
			esc = false
		case inStr:
			if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// ref is the reference outcome of scanning one message, computed with encoding/json
// only: the envelope struct the differential tests compare Scan against.
type ref struct {
	invalid bool // valid JSON but not a valid message
	kind    Kind
	id      []byte // raw id token
	method  *string
	rawMeth []byte
	params  []byte
	result  []byte
	errObj  []byte
	name    []byte // string contents as sent
	uri     []byte
	cursor  []byte
	token   []byte // raw
	reqID   []byte // raw
}

// members walks a JSON object with encoding/json's tokenizer and returns its members
// in order, keys decoded, values raw (duplicates kept, unlike a map).
func members(raw []byte) (keys []string, vals []json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		keys = append(keys, tok.(string))
		vals = append(vals, v)
	}
	return keys, vals, true
}

func isIntegerToken(v []byte) bool {
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') && !bytes.ContainsAny(v, ".eE")
}

func isNumberToken(v []byte) bool { return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') }

// reference computes the expected outcome for in, which must be valid JSON.
func reference(in []byte) ref {
	var r ref
	trimmed := bytes.TrimLeft(in, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return ref{invalid: true}
	}
	keys, vals, ok := members(trimmed)
	if !ok {
		panic("reference: valid JSON object did not tokenize")
	}
	if repeated(keys, "jsonrpc", "id", "method", "params", "result", "error") {
		r.invalid = true
	}
	var idNull, hasID, hasMethod, hasParams, hasResult, hasError bool
	for k, key := range keys {
		v := []byte(vals[k])
		switch key {
		case "jsonrpc":
			var s string
			if json.Unmarshal(v, &s) != nil || s != "2.0" {
				r.invalid = true
			}
		case "id":
			hasID = true
			switch {
			case v[0] == '"' || isIntegerToken(v):
				r.id = v
			case string(v) == "null":
				r.id, idNull = v, true
			default:
				r.invalid = true
			}
		case "method":
			hasMethod = true
			var s string
			if v[0] != '"' || json.Unmarshal(v, &s) != nil {
				r.invalid = true
				break
			}
			r.method = &s
			r.rawMeth = v[1 : len(v)-1]
		case "params":
			hasParams = true
			r.params = v
			switch v[0] {
			case '{':
				refParams(&r, v)
			case '[':
			default:
				r.invalid = true
			}
		case "result":
			hasResult = true
			r.result = v
		case "error":
			hasError = true
			r.errObj = v
			if !validErrorObject(v) {
				r.invalid = true
			}
		}
	}
	switch {
	case countKey(keys, "jsonrpc") == 0:
		r.invalid = true
	case hasMethod:
		if hasResult || hasError || hasID && idNull {
			r.invalid = true
		}
		r.kind = KindNotification
		if hasID {
			r.kind = KindRequest
		}
	case hasResult && hasError:
		r.invalid = true
	case hasResult || hasError:
		if !hasID || hasParams || idNull && hasResult {
			r.invalid = true
		}
		r.kind = KindError
		if hasResult {
			r.kind = KindResult
		}
	default:
		r.invalid = true
	}
	if countKey(keys, "id") > 1 {
		r.id = nil
	}
	return r
}

// repeated reports whether one of names stands more than once in keys.
func repeated(keys []string, names ...string) bool {
	for _, name := range names {
		if countKey(keys, name) > 1 {
			return true
		}
	}
	return false
}

func countKey(keys []string, k string) int {
	n := 0
	for _, key := range keys {
		if key == k {
			n++
		}
	}
	return n
}

func refParams(r *ref, params []byte) {
	keys, vals, _ := members(params)
	if repeated(keys, "name", "uri", "cursor", "requestId", "_meta", "progressToken") {
		r.invalid = true
	}
	var paramsToken []byte // params.progressToken counts when _meta has none
	defer func() {
		if r.token == nil {
			r.token = paramsToken
		}
	}()
	for k, key := range keys {
		v := []byte(vals[k])
		str := v[0] == '"'
		switch key {
		case "name":
			if str {
				r.name = v[1 : len(v)-1]
			}
		case "uri":
			if str {
				r.uri = v[1 : len(v)-1]
			}
		case "cursor":
			if str {
				r.cursor = v[1 : len(v)-1]
			}
		case "requestId":
			if str || isNumberToken(v) {
				r.reqID = v
			}
		case "progressToken":
			if str || isNumberToken(v) {
				paramsToken = v
			}
		case "_meta":
			if v[0] != '{' {
				break
			}
			mkeys, mvals, _ := members(v)
			if countKey(mkeys, "progressToken") > 1 {
				r.invalid = true
			}
			for j, mk := range mkeys {
				if mk == "progressToken" && (mvals[j][0] == '"' || isNumberToken(mvals[j])) {
					r.token = mvals[j]
				}
			}
		}
	}
}

func validErrorObject(v []byte) bool {
	if v[0] != '{' {
		return false
	}
	keys, vals, _ := members(v)
	if countKey(keys, "code") != 1 || countKey(keys, "message") != 1 {
		return false
	}
	for k, key := range keys {
		switch key {
		case "code":
			if !isIntegerToken(vals[k]) {
				return false
			}
		case "message":
			if vals[k][0] != '"' {
				return false
			}
		}
	}
	return true
}

// checkScan is the differential property: Scan agrees with json.Valid (plus UTF-8 and
// depth, where it is stricter on purpose) and with the reference envelope.
func checkScan(t *testing.T, in []byte) {
	t.Helper()
	var m Message
	err := Scan(in, &m)
	var e *Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("error %v is not an *Error", err)
	}
	if e != nil && (e.Offset < 0 || e.Offset > len(in)) {
		t.Fatalf("offset %d out of range [0,%d]", e.Offset, len(in))
	}
	if !json.Valid(in) || !utf8.Valid(in) {
		if e == nil || e.Code != CodeParseError {
			t.Fatalf("invalid JSON %q: got %v, want a parse error", in, err)
		}
		if !reflect.DeepEqual(m, Message{}) {
			t.Fatalf("message not zeroed on parse error: %+v", m)
		}
		return
	}
	if nestingDepth(in) > MaxDepth {
		if e == nil || e.Reason != reasonTooDeep {
			t.Fatalf("depth %d: got %v, want too deep", nestingDepth(in), err)
		}
		return
	}
	r := reference(in)
	if r.invalid {
		if e == nil || e.Code != CodeInvalidRequest {
			t.Fatalf("%q: got %v, want invalid request", in, err)
		}
		if m.Kind != KindInvalid {
			t.Fatalf("kind %v on an invalid request", m.Kind)
		}
		if m.ID != nil && r.id != nil && !bytes.Equal(m.ID, r.id) {
			t.Fatalf("id on invalid request: got %s, want %s", m.ID, r.id)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q: unexpected error %v", in, err)
	}
	eq := func(field string, got, want []byte) {
		t.Helper()
		if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: %s = %q, want %q", in, field, got, want)
		}
	}
	if m.Kind != r.kind {
		t.Fatalf("%q: kind %v, want %v", in, m.Kind, r.kind)
	}
	eq("ID", m.ID, r.id)
	eq("Params", m.Params, r.params)
	eq("Result", m.Result, r.result)
	eq("Error", m.Error, r.errObj)
	eq("Name", m.Name, r.name)
	eq("URI", m.URI, r.uri)
	eq("Cursor", m.Cursor, r.cursor)
	eq("ProgressToken", m.ProgressToken, r.token)
	eq("RequestID", m.RequestID, r.reqID)
	eq("Method", m.Method, r.rawMeth)
	if r.method != nil {
		dec, err := Unquote(nil, m.Method)
		if err != nil || string(dec) != *r.method {
			t.Fatalf("%q: Unquote(method) = %q, %v; want %q", in, dec, err, *r.method)
		}
	}
	for _, fl := range []struct {
		flag Flags
		v    []byte
	}{{MethodEscaped, m.Method}, {NameEscaped, m.Name}, {URIEscaped, m.URI}, {CursorEscaped, m.Cursor}} {
		if (m.Flags&fl.flag != 0) != (bytes.IndexByte(fl.v, '\\') >= 0) {
			t.Fatalf("%q: flag %b wrong for %q", in, fl.flag, fl.v)
		}
	}
	if (m.Flags&StateMember != 0) != (Member(m.Params, "requestState") != nil) {
		t.Fatalf("%q: StateMember is %v, Member(params, requestState) says otherwise", in, m.Flags&StateMember != 0)
	}
}

func FuzzScan(f *testing.F) {
	addCorpus(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		checkScan(t, in)
	})
}

// TestScanDifferentialCorpus runs the fuzz property over the corpus and over every
// prefix of every corpus message (truncations are the commonest real damage).
func TestScanDifferentialCorpus(t *testing.T) {
	for _, path := range corpusFiles(t) {
		in, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		checkScan(t, in)
		if len(in) > 4096 {
			in = in[:4096]
		}
		for k := range in {
			checkScan(t, in[:k])
		}
	}
}

func FuzzSplitBatch(f *testing.F) {
	addCorpus(f)
	f.Add([]byte(`[1,2,3]`))
	f.Add([]byte(`[{"jsonrpc":"2.0","method":"a"}, {"a":tru}]`))
	f.Add([]byte(`[x]`))
	f.Add([]byte("[\"a\tb\"]"))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkSplitBatch(t, in)
	})
}

// checkSplitBatch is the SplitBatch property: it splits exactly the arrays that
// encoding/json reads as arrays, it is never fooled into a clean split of invalid JSON
// (some element then fails Scan with a parse error), and it agrees with the Decoder.
func checkSplitBatch(t *testing.T, in []byte) {
	t.Helper()
	elems, err := SplitBatch(in, nil)
	var e *Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("error %v is not an *Error", err)
	}
	if err != nil && len(elems) != 0 {
		t.Fatalf("%d elements returned with an error", len(elems))
	}
	valid := json.Valid(in) && utf8.Valid(in)
	var want []json.RawMessage
	// json.Unmarshal reads null into a slice as well: an array starts with '['.
	trimmed := bytes.TrimLeft(in, " \t\r\n")
	isArray := valid && len(trimmed) > 0 && trimmed[0] == '[' && json.Unmarshal(in, &want) == nil
	switch {
	case isArray && len(want) == 0:
		if e == nil || e.Code != CodeInvalidRequest || e.Reason != reasonEmptyBatch {
			t.Fatalf("%q: empty batch: got %v", in, err)
		}
	case isArray:
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if len(elems) != len(want) {
			t.Fatalf("%d elements, want %d", len(elems), len(want))
		}
		for k := range want {
			if !bytes.Equal(elems[k], want[k]) {
				t.Fatalf("element %d = %q, want %q", k, elems[k], want[k])
			}
			checkScan(t, elems[k])
		}
	case valid:
		if e == nil || e.Code != CodeInvalidRequest || e.Reason != reasonNotArray {
			if e == nil || e.Reason != reasonTooDeep {
				t.Fatalf("%q: not an array: got %v", in, err)
			}
		}
	case err == nil:
		// Invalid JSON split cleanly: the damage must be inside an element.
		var m Message
		broken := false
		for _, el := range elems {
			broken = broken || errors.Is(Scan(el, &m), ErrParse)
		}
		if !broken {
			t.Fatalf("%q: invalid JSON split into elements that all scan", in)
		}
	}
	// The Decoder frames the same body the same way.
	if !IsBatch(in) || bytes.HasPrefix(in, []byte("\xEF\xBB\xBF")) {
		return
	}
	frames := decodeAll(t, bytes.NewReader(in), 1<<20)
	if err == nil {
		if len(frames) != len(elems)+1 || !frames[len(elems)].BatchEnd || frames[len(elems)].Code != 0 {
			t.Fatalf("%q: decoder frames %+v for a clean batch", in, frames)
		}
		for k, el := range elems {
			if frames[k].Data != string(el) || !frames[k].InBatch || frames[k].Code != 0 {
				t.Fatalf("%q: decoder frame %d = %+v, want %q", in, k, frames[k], el)
			}
		}
	} else if e.Code == CodeParseError && e.Reason != reasonTrailing {
		batchBroken := false
		for _, fr := range frames {
			batchBroken = batchBroken || fr.BatchEnd && fr.Code == CodeParseError
		}
		if !batchBroken {
			t.Fatalf("%q: SplitBatch says %v, decoder frames %+v", in, err, frames)
		}
	}
}

func FuzzUnquote(f *testing.F) {
	for _, s := range []string{``, `abc`, `a\"b`, `\u00e9\ud83d\ude00`, `\ud800`, `\ud800\u0041`, `\q`, `\u12`, "\xff", "é", `tab\tnl\n`, `\/`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, contents []byte) {
		quoted := append(append([]byte{'"'}, contents...), '"')
		got, err := Unquote(nil, contents)
		valid := json.Valid(quoted) && utf8.Valid(quoted)
		if !valid {
			if err == nil {
				t.Fatalf("Unquote(%q) accepted invalid contents", contents)
			}
			return
		}
		var want string
		if err := json.Unmarshal(quoted, &want); err != nil {
			t.Fatal(err)
		}
		if err != nil || string(got) != want {
			t.Fatalf("Unquote(%q) = %q, %v; want %q", contents, got, err, want)
		}
		// hasPrefixUnescaped agrees with the decoded form.
		if n, ok := hasPrefixUnescaped(contents, want); !ok || n != len(contents) {
			t.Fatalf("hasPrefixUnescaped(%q, %q) = %d, %v", contents, want, n, ok)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\"back\\slash", "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é日本🎉", "\xff\xfe", "\u2028\u2029", "<&>", strings.Repeat("abcdefgh", 5) + "\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString([]byte("prefix"), s)
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Fatal("dst prefix lost")
		}
		got = got[len("prefix"):]
		// Byte-identical to encoding/json without HTML escaping.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if q := AppendQuote(nil, []byte(s)); !bytes.Equal(q, got) {
			t.Fatalf("AppendQuote differs: %s vs %s", q, got)
		}
		var m Message
		msg := AppendNotification(nil, s, nil)
		if err := Scan(msg, &m); err != nil {
			t.Fatalf("Scan(AppendNotification(%q)): %v", s, err)
		}
		var decoded string
		if err := json.Unmarshal(got, &decoded); err != nil {
			t.Fatal(err)
		}
		if dec, err := Unquote(nil, m.Method); err != nil || string(dec) != decoded {
			t.Fatalf("method round trip: %q, %v; want %q", dec, err, decoded)
		}
	})
}

// randChunks is a deterministic reader that returns chunks of pseudo-random sizes.
type randChunks struct {
	b     []byte
	state uint64
}

func (r *randChunks) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	r.state = r.state*6364136223846793005 + 1442695040888963407
	n := int(r.state>>33)%17 + 1
	if r.state>>20&7 == 0 {
		n = int(r.state>>40)%300 + 1
	}
	n = min(n, len(p), len(r.b))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// frameRec is a comparable record of one Frame.
type frameRec struct {
	Data     string
	Nil      bool
	InBatch  bool
	BatchEnd bool
	Code     int
	Offset   int
	Reason   string
	TooLarge bool
}

func decodeAll(tb testing.TB, r io.Reader, max int) []frameRec {
	tb.Helper()
	d := NewDecoder(r, max)
	var out []frameRec
	for range 1 << 20 {
		f, err := d.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			tb.Fatalf("Next: %v", err)
		}
		rec := frameRec{Data: string(f.Data), Nil: f.Data == nil, InBatch: f.InBatch, BatchEnd: f.BatchEnd}
		if f.Err != nil {
			var e *Error
			if !errors.As(f.Err, &e) {
				tb.Fatalf("frame error %v is not an *Error", f.Err)
			}
			rec.Code, rec.Offset, rec.Reason, rec.TooLarge = e.Code, e.Offset, e.Reason, errors.Is(f.Err, ErrTooLarge)
		} else if !f.BatchEnd && len(f.Data) == 0 {
			tb.Fatalf("empty frame")
		}
		if len(f.Data) > max {
			tb.Fatalf("frame of %d bytes over the %d limit", len(f.Data), max)
		}
		out = append(out, rec)
	}
	tb.Fatal("decoder did not terminate")
	return nil
}

// streamReference returns the frames expected for in when it is a sequence of valid
// JSON values separated by whitespace (ok false otherwise), using encoding/json.
func streamReference(in []byte, max int) ([]frameRec, bool) {
	dec := json.NewDecoder(bytes.NewReader(in))
	var out []frameRec
	for {
		var v json.RawMessage
		err := dec.Decode(&v)
		if err == io.EOF {
			return out, true
		}
		if err != nil {
			return nil, false
		}
		if v[0] != '[' {
			if len(v) > max {
				return nil, false
			}
			// encoding/json reads "00" as two numbers; the Decoder, like any
			// reasonable framer, as one bad token. Compare only clean streams.
			if off := int(dec.InputOffset()); v[0] != '{' && v[0] != '"' && off < len(in) && !delim[in[off]] {
				return nil, false
			}
			out = append(out, frameRec{Data: string(v)})
			continue
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(v, &elems); err != nil {
			return nil, false
		}
		if len(elems) == 0 {
			out = append(out, frameRec{Nil: true, Code: CodeInvalidRequest, Reason: reasonEmptyBatch})
			continue
		}
		for _, e := range elems {
			if len(e) > max {
				return nil, false
			}
			out = append(out, frameRec{Data: string(e), InBatch: true})
		}
		out = append(out, frameRec{Nil: true, InBatch: true, BatchEnd: true})
	}
}

func FuzzDecoder(f *testing.F) {
	addCorpus(f)
	f.Add([]byte("{\"a\":1}\n[1, {\"b\":\"]\"}, \"x\"]\ngarbage\n{\"c\":2}"))
	f.Add([]byte(`[{"a":1},`))
	f.Add([]byte("{\"a\":\"x\ny\"}\n{\"b\":1}\n"))
	f.Add([]byte(`123 true"s"{}[]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 64
		whole := decodeAll(t, bytes.NewReader(in), max)
		for _, seed := range []uint64{1, 2, 3} {
			got := decodeAll(t, &randChunks{b: in, state: seed}, max)
			if !reflect.DeepEqual(got, whole) {
				t.Fatalf("chunking %d changed the frames:\n got %+v\nwant %+v", seed, got, whole)
			}
		}
		if want, ok := streamReference(in, max); ok && !reflect.DeepEqual(whole, want) {
			t.Fatalf("%q:\n got %+v\nwant %+v", in, whole, want)
		}
	})
}

func FuzzRewriteList(f *testing.F) {
	f.Add([]byte(toolsListResult(3)), "srv__")
	f.Add([]byte(`{"tools":[{"name":"a\u0041"},1,{"x":1},{"name":5}],"tools":[]}`), "p\"q")
	f.Add([]byte(`{"prompts":[{"name":"x"}]}`), "é/")
	f.Fuzz(func(t *testing.T, result []byte, prefix string) {
		if !utf8.ValidString(prefix) {
			return
		}
		out, err := AppendPrefixListNames([]byte("keep"), result, "tools", "name", prefix)
		if !bytes.HasPrefix(out, []byte("keep")) {
			t.Fatal("dst prefix lost")
		}
		out = out[len("keep"):]
		if !json.Valid(result) || !utf8.Valid(result) {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("invalid input accepted: %v", err)
			}
			return
		}
		if nestingDepth(result) > MaxDepth {
			return
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(result, &top) != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("non-object result: %v", err)
			}
			return
		}
		if err != nil {
			if errors.Is(err, ErrInvalidRequest) {
				keys, vals, _ := members(bytes.TrimLeft(result, " \t\r\n"))
				for k, key := range keys {
					if key == "tools" && vals[k][0] != '[' {
						return // a list member that is not an array
					}
				}
			}
			t.Fatalf("%q: %v", result, err)
		}
		// Semantics: decode both and compare with a reference transform.
		var got, want any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output not JSON: %v: %s", err, out)
		}
		if err := json.Unmarshal(result, &want); err != nil {
			t.Fatal(err)
		}
		if tools, ok := want.(map[string]any)["tools"].([]any); ok {
			for _, el := range tools {
				if obj, ok := el.(map[string]any); ok {
					if s, ok := obj["name"].(string); ok {
						obj["name"] = prefix + s
					}
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("prefix %q on %s:\n got %s", prefix, result, out)
		}
		// Stripping what was added gives the input back, byte for byte.
		back, err := AppendStripListNames(nil, out, "tools", "name", prefix)
		if err != nil || !bytes.Equal(back, result) {
			t.Fatalf("strip: %v\n got %s\nwant %s", err, back, result)
		}
	})
}
