package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/mcprouter/mcprouter/codec"
)

// era groups the protocol revisions by what they change in this server's answers.
type era uint8

const (
	era20241105 era = iota // the first revision
	era20250326            // tool annotations, completions capability, progress message
	era20250618            // titles, outputSchema and structuredContent
	numEras
)

func eraOf(version string) era {
	switch {
	case version >= "2025-06-18":
		return era20250618
	case version >= "2025-03-26":
		return era20250326
	}
	return era20241105
}

// encoded is one catalog entry as JSON, per era, computed once at startup.
type encoded [numEras][]byte

// listing is one paginated list: its member name in the result and its entries.
type listing struct {
	member string // "tools", "resources", "resourceTemplates", "prompts"
	kind   string // cursor tag, so that a cursor of one list is refused by another
	items  []encoded
}

type toolKind uint8

const (
	toolEcho toolKind = iota
	toolSleep
	toolPayload
	toolFail
	toolFailRPC
	toolProgress
	toolSample
	toolTouch
	toolLog
	// The hostile tools of Config.Faults (fault.go).
	toolFaultSlowBytes
	toolFaultOversize
	toolFaultFlood
	toolFaultInvalidJSON
	toolFaultUnknownID
	toolFaultDoubleAnswer
	toolFaultNeverAnswer
)

type tool struct {
	name string
	kind toolKind
}

type resKind uint8

const (
	resCounter resKind = iota
	resMemo
	resItem
	resStats
)

// resource is a listed resource whose contents carry a version that changes (on the
// timer for counter://tick, on the touch tool for the others).
type resource struct {
	uri     string
	name    string
	mime    string
	kind    resKind
	version atomic.Uint64
}

// text is the resource's current contents.
func (r *resource) text() string {
	v := strconv.FormatUint(r.version.Load(), 10)
	switch r.kind {
	case resCounter:
		return "tick " + v
	case resMemo:
		return "memo board, version " + v
	}
	return r.name + ", version " + v
}

type prompt struct {
	name        string
	description string
	args        []promptArg
	render      func(args map[string]string) string
}

type promptArg struct {
	name        string
	description string
	required    bool
	values      []string // completion candidates
}

// catalog is the server's fixed offer. It is immutable after newCatalog, except the
// resources' versions.
type catalog struct {
	tools, resources, templates, prompts listing

	toolByName map[string]*tool
	resByURI   map[string]*resource
	counter    *resource
	promptBy   map[string]*prompt
	// completions of resource template arguments, by template then argument.
	templateArgs map[string]map[string][]string
}

// listOf is the listing a */list method reads (nil for any other method), for the
// request switches of both eras.
func (c *catalog) listOf(method []byte) *listing {
	switch string(method) {
	case "tools/list":
		return &c.tools
	case "resources/list":
		return &c.resources
	case "resources/templates/list":
		return &c.templates
	case "prompts/list":
		return &c.prompts
	}
	return nil
}

// JSON shapes of catalog entries; encoded once per era with encoding/json.
type (
	toolJSON struct {
		Name         string          `json:"name"`
		Title        string          `json:"title,omitempty"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
		Annotations  *annotations    `json:"annotations,omitempty"`
	}
	annotations struct {
		ReadOnlyHint    bool `json:"readOnlyHint"`
		DestructiveHint bool `json:"destructiveHint"`
		IdempotentHint  bool `json:"idempotentHint"`
		OpenWorldHint   bool `json:"openWorldHint"`
	}
	resourceJSON struct {
		URI         string `json:"uri,omitempty"`
		URITemplate string `json:"uriTemplate,omitempty"`
		Name        string `json:"name"`
		Title       string `json:"title,omitempty"`
		Description string `json:"description"`
		MimeType    string `json:"mimeType"`
	}
	promptJSON struct {
		Name        string          `json:"name"`
		Title       string          `json:"title,omitempty"`
		Description string          `json:"description"`
		Arguments   []promptArgJSON `json:"arguments"`
	}
	promptArgJSON struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Required    bool   `json:"required"`
	}
)

const (
	textSchema       = `{"type":"object","properties":{"text":{"type":"string","description":"the text to return"}},"required":["text"]}`
	textOutputSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`
)

type toolSpec struct {
	name, title, description string
	kind                     toolKind
	input, output            string
	readOnly, idempotent     bool
}

var builtinTools = []toolSpec{
	{"echo", "Echo", "Returns its text argument.", toolEcho, textSchema, textOutputSchema, true, true},
	{"sleep", "Sleep", "Waits ms milliseconds, then answers. Cancellable.", toolSleep,
		`{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"description":"milliseconds to wait"}},"required":["ms"]}`,
		`{"type":"object","properties":{"sleptMs":{"type":"integer"}},"required":["sleptMs"]}`, true, true},
	{"payload", "Payload", "Returns a text of exactly the given number of bytes.", toolPayload,
		`{"type":"object","properties":{"bytes":{"type":"integer","minimum":0,"description":"size of the text"}},"required":["bytes"]}`,
		`{"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]}`, true, true},
	{"fail", "Fail", "Fails as a tool: the result has isError set and the message as text.", toolFail,
		`{"type":"object","properties":{"message":{"type":"string"}}}`, "", true, true},
	{"fail_rpc", "Fail with a JSON-RPC error", "Fails as a protocol error: the response is a JSON-RPC error with the given code and message (with code -32042 and a url, its data lists that URL-mode elicitation).", toolFailRPC,
		`{"type":"object","properties":{"message":{"type":"string"},"code":{"type":"integer"},"url":{"type":"string"}}}`, "", true, true},
	{"progress", "Progress", "Takes steps every intervalMs, sending notifications/progress for each when the request has a progress token. Cancellable.", toolProgress,
		`{"type":"object","properties":{"steps":{"type":"integer","minimum":1},"intervalMs":{"type":"integer","minimum":0}}}`,
		`{"type":"object","properties":{"steps":{"type":"integer"}},"required":["steps"]}`, true, true},
	{"sample", "Sample", "Asks the client to sample a model (sampling/createMessage) with the prompt and returns the answer's text.", toolSample,
		`{"type":"object","properties":{"prompt":{"type":"string"},"maxTokens":{"type":"integer","minimum":1}},"required":["prompt"]}`,
		textOutputSchema, true, false},
	{"touch", "Touch", "Changes a resource (a new version of its contents) and notifies its subscribers.", toolTouch,
		`{"type":"object","properties":{"uri":{"type":"string"}},"required":["uri"]}`,
		`{"type":"object","properties":{"uri":{"type":"string"},"version":{"type":"integer"}},"required":["uri","version"]}`, false, false},
	{"log", "Log", "Sends a log message (notifications/message) at the given level, if the session's level lets it through.", toolLog,
		`{"type":"object","properties":{"level":{"type":"string","enum":["debug","info","notice","warning","error","critical","alert","emergency"]},"message":{"type":"string"}},"required":["message"]}`,
		"", true, true},
}

func (t toolSpec) encode() encoded {
	var e encoded
	for era := era20241105; era < numEras; era++ {
		j := toolJSON{Name: t.name, Description: t.description, InputSchema: json.RawMessage(t.input)}
		if era >= era20250326 {
			j.Annotations = &annotations{ReadOnlyHint: t.readOnly, IdempotentHint: t.idempotent}
		}
		if era >= era20250618 {
			j.Title = t.title
			if t.output != "" {
				j.OutputSchema = json.RawMessage(t.output)
			}
		}
		e[era] = mustJSON(j)
	}
	return e
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mcpbackend: catalog entry does not encode: " + err.Error())
	}
	return b
}

// encodeSame encodes entries whose JSON differs by era only in the title field.
func encodeSame(withTitle, withoutTitle any) encoded {
	var e encoded
	old := mustJSON(withoutTitle)
	e[era20241105], e[era20250326], e[era20250618] = old, old, mustJSON(withTitle)
	return e
}

func newCatalog(cfg Config) *catalog {
	c := &catalog{
		tools:      listing{member: "tools", kind: "t"},
		resources:  listing{member: "resources", kind: "r"},
		templates:  listing{member: "resourceTemplates", kind: "rt"},
		prompts:    listing{member: "prompts", kind: "p"},
		toolByName: make(map[string]*tool),
		resByURI:   make(map[string]*resource),
		promptBy:   make(map[string]*prompt),
	}
	for _, t := range builtinTools {
		c.addTool(t)
	}
	c.addFaultTools(cfg.Faults)
	for i := 1; i <= cfg.ExtraTools; i++ {
		c.addTool(toolSpec{
			name: fmt.Sprintf("tool_%04d", i), title: fmt.Sprintf("Tool %04d", i),
			description: "Generated echo-like tool: returns its text argument.",
			kind:        toolEcho, input: textSchema, output: textOutputSchema, readOnly: true, idempotent: true,
		})
	}

	c.counter = c.addResource("counter://tick", "tick", "Tick counter", "A counter that changes on a timer; subscribe to be told.", "text/plain", resCounter)
	c.addResource("memo://board", "board", "Memo board", "A note that changes when the touch tool names it.", "text/plain", resMemo)
	c.addResource("stats://server", "stats", "Server statistics",
		"This backend's counters as JSON (sessions, calls, calls in flight, cancelled calls...), for tests and demos.", "application/json", resStats)
	for i := 1; i <= cfg.ExtraResources; i++ {
		c.addResource(fmt.Sprintf("item://%04d", i), fmt.Sprintf("item %04d", i), fmt.Sprintf("Item %04d", i),
			"Generated resource; changes when the touch tool names it.", "text/plain", resItem)
	}

	c.templates.items = append(c.templates.items,
		encodeSame(
			resourceJSON{URITemplate: "echo://{text}", Name: "echo", Title: "Echo", Description: "Contents are the text in the URI.", MimeType: "text/plain"},
			resourceJSON{URITemplate: "echo://{text}", Name: "echo", Description: "Contents are the text in the URI.", MimeType: "text/plain"}),
		encodeSame(
			resourceJSON{URITemplate: "bytes://{n}", Name: "bytes", Title: "Bytes", Description: "Contents are n bytes of text.", MimeType: "text/plain"},
			resourceJSON{URITemplate: "bytes://{n}", Name: "bytes", Description: "Contents are n bytes of text.", MimeType: "text/plain"}),
	)
	c.templateArgs = map[string]map[string][]string{
		"echo://{text}": {"text": {"hello", "hello world", "help", "howdy"}},
		"bytes://{n}":   {"n": {"1", "16", "1024", "16384", "65536"}},
	}

	c.addPrompt(&prompt{
		name: "greet", description: "Greets someone in the chosen style.",
		args: []promptArg{
			{name: "name", description: "who to greet", required: true, values: []string{"Ada", "Alan", "Barbara", "Grace", "Linus"}},
			{name: "style", description: "casual, formal or pirate", values: []string{"casual", "formal", "pirate"}},
		},
		render: func(a map[string]string) string {
			switch a["style"] {
			case "formal":
				return "Good day, " + a["name"] + ". It is a pleasure to make your acquaintance."
			case "pirate":
				return "Ahoy, " + a["name"] + "!"
			}
			return "Hi " + a["name"] + "!"
		},
	})
	c.addPrompt(&prompt{
		name: "summarize", description: "Asks for a summary of a text.",
		args: []promptArg{
			{name: "text", description: "the text to summarize", required: true},
			{name: "length", description: "short, medium or long", values: []string{"long", "medium", "short"}},
		},
		render: func(a map[string]string) string {
			l := a["length"]
			if l == "" {
				l = "short"
			}
			return "Write a " + l + " summary of the following text:\n\n" + a["text"]
		},
	})
	if cfg.UnlistedResources {
		c.resources.items, c.templates.items = nil, nil
	}
	return c
}

func (c *catalog) addTool(t toolSpec) {
	c.toolByName[t.name] = &tool{name: t.name, kind: t.kind}
	c.tools.items = append(c.tools.items, t.encode())
}

func (c *catalog) addResource(uri, name, title, desc, mime string, kind resKind) *resource {
	r := &resource{uri: uri, name: name, mime: mime, kind: kind}
	r.version.Store(1)
	c.resByURI[uri] = r
	c.resources.items = append(c.resources.items, encodeSame(
		resourceJSON{URI: uri, Name: name, Title: title, Description: desc, MimeType: mime},
		resourceJSON{URI: uri, Name: name, Description: desc, MimeType: mime}))
	return r
}

func (c *catalog) addPrompt(p *prompt) {
	c.promptBy[p.name] = p
	args := make([]promptArgJSON, len(p.args))
	for i, a := range p.args {
		args[i] = promptArgJSON{Name: a.name, Description: a.description, Required: a.required}
	}
	title := string(p.name[0]-'a'+'A') + p.name[1:]
	c.prompts.items = append(c.prompts.items, encodeSame(
		promptJSON{Name: p.name, Title: title, Description: p.description, Arguments: args},
		promptJSON{Name: p.name, Description: p.description, Arguments: args}))
}

// Cursors are opaque to clients: base64url of "<list kind>:<offset>". The kind tag makes
// a cursor of one list invalid for another.
func appendCursor(dst []byte, kind string, offset int) []byte {
	var raw [32]byte
	plain := append(raw[:0], kind...)
	plain = append(plain, ':')
	plain = strconv.AppendInt(plain, int64(offset), 10)
	n := base64.RawURLEncoding.EncodedLen(len(plain))
	dst = append(dst, make([]byte, n)...)
	base64.RawURLEncoding.Encode(dst[len(dst)-n:], plain)
	return dst
}

// parseCursor returns the offset a cursor names, or ok=false when it is not one of ours
// for this list.
func parseCursor(cursor []byte, kind string, n int) (int, bool) {
	var raw [32]byte
	if base64.RawURLEncoding.DecodedLen(len(cursor)) > len(raw) {
		return 0, false
	}
	k, err := base64.RawURLEncoding.Decode(raw[:], cursor)
	if err != nil {
		return 0, false
	}
	plain := raw[:k]
	if len(plain) <= len(kind)+1 || string(plain[:len(kind)]) != kind || plain[len(kind)] != ':' {
		return 0, false
	}
	off, ok := intValue(plain[len(kind)+1:])
	if !ok || off < 0 || off > int64(n) {
		return 0, false
	}
	return int(off), true
}

// list answers one of the */list methods with the page the cursor names.
func (s *Server) list(m *codec.Message, sess *Session, r Responder, l *listing) {
	start := 0
	if m.Cursor != nil {
		cursor := m.Cursor
		var cb [64]byte
		if m.Flags&codec.CursorEscaped != 0 {
			dec, err := codec.Unquote(cb[:0], cursor)
			if err != nil {
				replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: invalid cursor", nil)
				return
			}
			cursor = dec
		}
		off, ok := parseCursor(cursor, l.kind, len(l.items))
		if !ok {
			replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: invalid cursor", nil)
			return
		}
		start = off
	}
	end := min(start+s.cfg.PageSize, len(l.items))
	bp := getBuf()
	b := beginResult(*bp, m.ID)
	b = append(b, `{"`...)
	b = append(b, l.member...)
	b = append(b, `":[`...)
	for i := start; i < end; i++ {
		if i > start {
			b = append(b, ',')
		}
		b = append(b, l.items[i][sess.era]...)
	}
	b = append(b, ']')
	if end < len(l.items) {
		b = append(b, `,"nextCursor":"`...)
		b = appendCursor(b, l.kind, end)
		b = append(b, '"')
	}
	b = append(b, `}}`...)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}
