package fleettest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// events is what a client received besides responses: log messages, progress and
// resource updates. Both client wrappers record into one.
type events struct {
	mu       sync.Mutex
	logs     []logMsg
	progress map[string][]float64 // by progress token, as text
	updates  map[string]int       // resources/updated count by URI
}

type logMsg struct{ logger, data string }

func (e *events) addLog(logger, data string) {
	e.mu.Lock()
	e.logs = append(e.logs, logMsg{logger, data})
	e.mu.Unlock()
}

func (e *events) addProgress(token any, v float64) {
	e.mu.Lock()
	if e.progress == nil {
		e.progress = map[string][]float64{}
	}
	k := fmt.Sprint(token)
	e.progress[k] = append(e.progress[k], v)
	e.mu.Unlock()
}

func (e *events) addUpdate(uri string) {
	e.mu.Lock()
	if e.updates == nil {
		e.updates = map[string]int{}
	}
	e.updates[uri]++
	e.mu.Unlock()
}

// loggersOf returns the loggers of the log messages whose data is data.
func (e *events) loggersOf(data string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, l := range e.logs {
		if l.data == data {
			out = append(out, l.logger)
		}
	}
	return out
}

// progressOf returns a copy of the progress values received for token.
func (e *events) progressOf(token string) []float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]float64(nil), e.progress[token]...)
}

// updatesOf returns how many resources/updated arrived for uri.
func (e *events) updatesOf(uri string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.updates[uri]
}

// sdkClient is a Go SDK client session with the router.
type sdkClient struct {
	events
	cs *mcp.ClientSession
	// drop ends the context the client connected with: over legacy HTTP+SSE its stream
	// ends, which ends the session without a word, as a client that goes away does.
	drop context.CancelFunc
}

// clientOptions shape a test client.
type clientOptions struct {
	// sse connects to the router's legacy HTTP+SSE endpoint instead of Streamable HTTP.
	sse bool
	// sample, when set, declares the sampling capability and answers each
	// sampling/createMessage with sample(prompt).
	sample func(prompt string) string
	// version is the protocol revision to ask for; "" takes the client's default.
	version string
	// listen opens mcp-go's standalone GET stream, where the server's own notifications
	// (resource updates) travel. The Go SDK always opens it.
	listen bool
}

// connectSDK connects a Go SDK client to the router; it is closed at cleanup.
func connectSDK(t testing.TB, f *fleet, o clientOptions) *sdkClient {
	t.Helper()
	c := &sdkClient{}
	opts := &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			c.addLog(r.Params.Logger, fmt.Sprint(r.Params.Data))
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			c.addProgress(r.Params.ProgressToken, r.Params.Progress)
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			c.addUpdate(r.Params.URI)
		},
	}
	if o.sample != nil {
		opts.CreateMessageHandler = func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := ""
			if len(r.Params.Messages) > 0 {
				if tc, ok := r.Params.Messages[0].Content.(*mcp.TextContent); ok {
					prompt = tc.Text
				}
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "fleettest", Content: &mcp.TextContent{Text: o.sample(prompt)}}, nil
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "fleettest-go-sdk", Version: "1"}, opts)
	var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: f.mcpURL(), MaxRetries: -1}
	if o.sse {
		tr = &mcp.SSEClientTransport{Endpoint: f.sseURL()}
	}
	// The legacy SSE transport keeps its stream on the context given to Connect: it must
	// live as long as the session, so the bound on connecting is a timer, not a deadline.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	timer := time.AfterFunc(wait, cancel)
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: o.version})
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("not connected within %v", wait)
	}
	if err != nil {
		t.Fatalf("go-sdk connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs, c.drop = cs, cancel
	return c
}

// call calls a tool through the router, bounded by wait.
func (c *sdkClient) call(name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// mustText calls a tool and returns its text, failing t on any error.
func (c *sdkClient) mustText(t testing.TB, name string, args map[string]any) string {
	t.Helper()
	res, err := c.call(name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, sdkText(res))
	}
	return sdkText(res)
}

// sdkText joins a result's text contents.
func sdkText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// rpcCode is the JSON-RPC error code carried by a Go SDK client error, 0 if none.
func rpcCode(err error) int64 {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

// mcpgoClient is an mcp-go client session with the router (Streamable HTTP).
type mcpgoClient struct {
	events
	c *mcpgoclient.Client
}

// samplingFunc adapts a function to mcp-go's SamplingHandler.
type samplingFunc func(prompt string) string

func (s samplingFunc) CreateMessage(_ context.Context, r mcpgo.CreateMessageRequest) (*mcpgo.CreateMessageResult, error) {
	prompt := ""
	if len(r.CreateMessageParams.Messages) > 0 {
		switch tc := r.CreateMessageParams.Messages[0].Content.(type) {
		case mcpgo.TextContent:
			prompt = tc.Text
		case *mcpgo.TextContent:
			prompt = tc.Text
		}
	}
	return &mcpgo.CreateMessageResult{
		SamplingMessage: mcpgo.SamplingMessage{Role: mcpgo.RoleAssistant, Content: mcpgo.NewTextContent(s(prompt))},
		Model:           "fleettest",
	}, nil
}

// connectMCPGo connects an mcp-go client to the router's Streamable HTTP endpoint and
// initializes it; it is closed at cleanup.
func connectMCPGo(t testing.TB, f *fleet, o clientOptions) *mcpgoClient {
	t.Helper()
	topts := []mcpgotransport.StreamableHTTPCOption{
		mcpgotransport.WithHTTPTimeout(wait),
		mcpgotransport.WithHTTPLogger(slog.New(slog.DiscardHandler)),
	}
	if o.listen {
		topts = append(topts, mcpgotransport.WithContinuousListening())
	}
	tr, err := mcpgotransport.NewStreamableHTTP(f.mcpURL(), topts...)
	if err != nil {
		t.Fatal(err)
	}
	var copts []mcpgoclient.ClientOption
	if o.sample != nil {
		copts = append(copts, mcpgoclient.WithSamplingHandler(samplingFunc(o.sample)))
	}
	c := &mcpgoClient{c: mcpgoclient.NewClient(tr, copts...)}
	// The listening stream lives on Start's context: it must last as long as the
	// session (see connectSDK).
	life, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := c.c.Start(life); err != nil {
		t.Fatalf("mcp-go start: %v", err)
	}
	t.Cleanup(func() { c.c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c.c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		fields := n.Params.AdditionalFields
		switch n.Method {
		case "notifications/message":
			logger, _ := fields["logger"].(string)
			c.addLog(logger, fmt.Sprint(fields["data"]))
		case "notifications/progress":
			v, _ := fields["progress"].(float64)
			c.addProgress(fields["progressToken"], v)
		case "notifications/resources/updated":
			uri, _ := fields["uri"].(string)
			c.addUpdate(uri)
		}
	})
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = o.version
	if req.Params.ProtocolVersion == "" {
		req.Params.ProtocolVersion = "2025-06-18"
	}
	req.Params.ClientInfo = mcpgo.Implementation{Name: "fleettest-mcp-go", Version: "1"}
	if _, err := c.c.Initialize(ctx, req); err != nil {
		t.Fatalf("mcp-go initialize: %v", err)
	}
	return c
}

// call calls a tool, bounded by wait; meta may carry a progress token.
func (c *mcpgoClient) call(name string, args map[string]any, progressToken any) (*mcpgo.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req := mcpgo.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if progressToken != nil {
		req.Params.Meta = &mcpgo.Meta{ProgressToken: progressToken}
	}
	return c.c.CallTool(ctx, req)
}

// mcpgoText joins a result's text contents.
func mcpgoText(res *mcpgo.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := mcpgo.AsTextContent(c); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured decodes a result's structuredContent into v.
func structured(raw any, v any) error {
	b, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// backendStats are the counters of one backend process (its stats://server resource),
// read directly from the process, never through the router.
type backendStats struct {
	Sessions  int64  `json:"sessions"`
	InFlight  int64  `json:"inFlight"`
	Messages  uint64 `json:"messages"`
	Calls     uint64 `json:"calls"`
	Cancelled uint64 `json:"cancelled"`
}

// statsReader is a Go SDK session opened directly on one backend process, to read its
// statistics and change its resources without the router.
type statsReader struct{ cs *mcp.ClientSession }

func readStatsOf(t testing.TB, p *proc) *statsReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "fleettest-stats", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: backendURL(p), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect to %s directly: %v", p.Addr(), err)
	}
	t.Cleanup(func() { cs.Close() })
	return &statsReader{cs: cs}
}

// directStats reads the counters of the fleet's HTTP backends (big, old, and the pair's
// two replicas) from the processes themselves; the stdio backend has none to read.
type directStats struct {
	t        testing.TB
	replicas map[string][]*proc
	readers  map[*proc]*statsReader
}

func newDirectStats(t testing.TB, f *fleet) *directStats {
	d := &directStats{t: t, replicas: map[string][]*proc{bigName: {f.big}, oldName: {f.old}, pairName: {f.pair[0], f.pair[1]}},
		readers: map[*proc]*statsReader{}}
	for _, ps := range d.replicas {
		for _, p := range ps {
			d.readers[p] = readStatsOf(t, p)
		}
	}
	return d
}

// has reports whether backend b's counters can be read.
func (d *directStats) has(b string) bool { _, ok := d.replicas[b]; return ok }

// sum adds a counter over backend b's replicas.
func (d *directStats) sum(b string, field func(backendStats) int64) int64 {
	n := int64(0)
	for _, p := range d.replicas[b] {
		s, err := d.readers[p].read()
		if err != nil {
			d.t.Fatalf("stats of %s: %v", p.Addr(), err)
		}
		n += field(s)
	}
	return n
}

// cancelWatch follows a long call on backend b to its cancellation: through the
// router's metrics, and the backend's own counters where they can be read.
type cancelWatch struct {
	d        *directStats
	f        *fleet
	b, label string
	router   float64 // the cancellations the router counted before the call
	backend  int64   // and the backend
}

// watchCancel notes the cancellations counted so far, before the call starts.
func (d *directStats) watchCancel(f *fleet, b string) *cancelWatch {
	w := &cancelWatch{d: d, f: f, b: b, label: `backend="` + b + `"`, router: f.metric("mcprouter_backend_cancellations_total")}
	if d.has(b) {
		w.backend = d.sum(b, statCancelled)
	}
	return w
}

// running waits until the backend runs the call.
func (w *cancelWatch) running(t testing.TB) {
	t.Helper()
	if !testwait.Poll(wait, func() bool {
		return w.f.metric("mcprouter_backend_in_flight_requests", w.label) >= 1 && (!w.d.has(w.b) || w.d.sum(w.b, statInFlight) >= 1)
	}) {
		t.Fatalf("the call never reached %s", w.b)
	}
}

// cancelled checks that the router released the call and counted one cancellation more,
// and that the backend heard of it.
func (w *cancelWatch) cancelled(t testing.TB) {
	t.Helper()
	if !testwait.Poll(wait, func() bool {
		return w.f.metric("mcprouter_backend_in_flight_requests", w.label) == 0 &&
			w.f.metric("mcprouter_backend_cancellations_total") == w.router+1
	}) {
		m, _ := w.f.metrics()
		t.Fatalf("the router did not cancel the call within %v:\n%s", wait, m.grep("mcprouter_backend_"))
	}
	if w.d.has(w.b) && !testwait.Poll(wait, func() bool {
		return w.d.sum(w.b, statCancelled) == w.backend+1 && w.d.sum(w.b, statInFlight) == 0
	}) {
		t.Errorf("%s did not hear of the cancellation within %v: cancelled %d (was %d), in flight %d",
			w.b, wait, w.d.sum(w.b, statCancelled), w.backend, w.d.sum(w.b, statInFlight))
	}
}

// The counters a test sums over a backend's replicas.
func statInFlight(s backendStats) int64  { return s.InFlight }
func statCancelled(s backendStats) int64 { return int64(s.Cancelled) }

func (r *statsReader) read() (backendStats, error) {
	var s backendStats
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := r.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "stats://server"})
	if err != nil {
		return s, err
	}
	if len(res.Contents) != 1 {
		return s, fmt.Errorf("stats://server: %d contents", len(res.Contents))
	}
	err = json.Unmarshal([]byte(res.Contents[0].Text), &s)
	return s, err
}

// touch changes a resource on the backend process directly.
func (r *statsReader) touch(t testing.TB, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res, err := r.cs.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": uri}})
	if err != nil || res.IsError {
		t.Fatalf("touch %s directly: %v %+v", uri, err, res)
	}
}
