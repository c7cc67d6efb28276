package router

import (
	"context"
	"log/slog"
	"time"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mono"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/logsafe"
)

// This file is the router's side of observability: the bounded labels a request is
// counted under (its method and outcome), the Observer that receives one measurement
// per finished client request, and the request log lines carrying the W3C traceparent a
// client put in params._meta.
//
// Timings use one clock, Now (monotonic nanoseconds), stamped at three points: when the
// router receives the message (job.start), when the fleet hands it to a backend and
// when the backend's answer comes back. Router time is the total minus backend time, so
// the dispatcher queue, the worker wait and the rewrites all count as the router's.

// Method is a request's method as a bounded metrics label: the methods a client may
// send to a server in the supported revisions, and MethodOther for everything else
// (including method names written with escapes), so that a client inventing methods
// cannot grow the label set.
type Method uint8

// The known client-to-server request methods.
const (
	MethodOther Method = iota
	MethodInitialize
	MethodPing
	MethodToolsList
	MethodToolsCall
	MethodPromptsList
	MethodPromptsGet
	MethodResourcesList
	MethodResourcesTemplatesList
	MethodResourcesRead
	MethodResourcesSubscribe
	MethodResourcesUnsubscribe
	MethodCompletionComplete
	MethodLoggingSetLevel
	MethodShutdown
	MethodServerDiscover
	MethodTasksGet
	MethodTasksList
	MethodTasksResult
	MethodTasksCancel
	NumMethods // the number of Method values
)

var methodNames = [NumMethods]string{
	MethodOther:                  "other",
	MethodInitialize:             "initialize",
	MethodPing:                   "ping",
	MethodToolsList:              "tools/list",
	MethodToolsCall:              "tools/call",
	MethodPromptsList:            "prompts/list",
	MethodPromptsGet:             "prompts/get",
	MethodResourcesList:          "resources/list",
	MethodResourcesTemplatesList: "resources/templates/list",
	MethodResourcesRead:          "resources/read",
	MethodResourcesSubscribe:     "resources/subscribe",
	MethodResourcesUnsubscribe:   "resources/unsubscribe",
	MethodCompletionComplete:     "completion/complete",
	MethodLoggingSetLevel:        "logging/setLevel",
	MethodShutdown:               "shutdown",
	MethodServerDiscover:         "server/discover",
	MethodTasksGet:               "tasks/get",
	MethodTasksList:              "tasks/list",
	MethodTasksResult:            "tasks/result",
	MethodTasksCancel:            "tasks/cancel",
}

// String returns the method's name, the value of the method label.
func (m Method) String() string {
	if m < NumMethods {
		return methodNames[m]
	}
	return methodNames[MethodOther]
}

// MethodOf maps a method name (the raw contents of the method string) to its label.
// It does not allocate.
func MethodOf(name []byte) Method {
	switch string(name) {
	case "tools/call":
		return MethodToolsCall
	case "tools/list":
		return MethodToolsList
	case "resources/read":
		return MethodResourcesRead
	case "ping":
		return MethodPing
	case "initialize":
		return MethodInitialize
	case "prompts/list":
		return MethodPromptsList
	case "prompts/get":
		return MethodPromptsGet
	case "resources/list":
		return MethodResourcesList
	case "resources/templates/list":
		return MethodResourcesTemplatesList
	case "resources/subscribe":
		return MethodResourcesSubscribe
	case "resources/unsubscribe":
		return MethodResourcesUnsubscribe
	case "completion/complete":
		return MethodCompletionComplete
	case "logging/setLevel":
		return MethodLoggingSetLevel
	case "shutdown":
		return MethodShutdown
	case "server/discover":
		return MethodServerDiscover
	case "tasks/get":
		return MethodTasksGet
	case "tasks/list":
		return MethodTasksList
	case "tasks/result":
		return MethodTasksResult
	case "tasks/cancel":
		return MethodTasksCancel
	}
	return MethodOther
}

// Outcome is how a client request ended, as a bounded metrics label.
type Outcome uint8

const (
	// OutcomeOK: a result went back.
	OutcomeOK Outcome = iota
	// OutcomeError: a JSON-RPC error went back, from the backend or made by the router
	// (unknown tool, invalid params, not initialized...).
	OutcomeError
	// OutcomeTimeout: the backend did not answer within its timeout.
	OutcomeTimeout
	// OutcomeOverloaded: refused by backpressure, the router's (a full dispatcher queue,
	// shutdown) or a backend's concurrency limit.
	OutcomeOverloaded
	// OutcomeUnavailable: no backend instance could take it, or the connection to the
	// one that had it was lost.
	OutcomeUnavailable
	// OutcomeCancelled: the client cancelled it (notifications/cancelled).
	OutcomeCancelled
	// NumOutcomes is the number of Outcome values.
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{"ok", "error", "timeout", "overloaded", "unavailable", "cancelled"}

// String returns the outcome's label value.
func (o Outcome) String() string {
	if o < NumOutcomes {
		return outcomeNames[o]
	}
	return "error"
}

// NoBackend is the backend index of a request the router answered itself (lifecycle
// methods, merged lists, errors found before forwarding).
const NoBackend = -1

// Observer receives one call per client request, when it ends, just before its answer
// goes out (x is still valid: its message and session may be read, not kept). backend
// is the index of the backend in the fleet's configuration, or NoBackend; start is when
// the router received the request and backendNs the time spent waiting for a backend,
// both on the clock of Now. A request the client cancelled is reported with
// OutcomeCancelled although no answer goes out.
//
// RequestDone runs on the hot path, on whichever goroutine finished the request, many at
// a time: it must not block and should not allocate.
//
// FanOutDelivered receives one call per client session a resource update reached: ns
// is the time from the router receiving the update from its backend (on this instance
// or another, over NATS) to handing it to the session's stream. It runs on the
// goroutine that fans the update out, once per session, under the same rules.
//
// Both are in one interface, so that every Observer that wraps another (the request
// log, tracing, the audit) passes both on: an optional method would be lost at the
// first wrapper that did not know it.
type Observer interface {
	RequestDone(x *transport.Exchange, backend int, o Outcome, start, backendNs int64)
	FanOutDelivered(ns int64)
}

// Now is the clock of request timings: monotonic nanoseconds since the process started
// (mono.Nanos), so wall-clock steps do not distort durations.
func Now() int64 { return mono.Nanos() }

// Started returns when the router received x, on the clock of Now, or 0 when unknown.
// It is meant for the fleet, during Prepare: the router keeps its job in x.Tag until
// the fleet puts its own state there.
func Started(x *transport.Exchange) int64 {
	if j, ok := x.Tag.(*job); ok {
		return j.start
	}
	return 0
}

// Observer returns what the fleet must report its finished requests to: the router's
// request log (debug level) followed by Config.Observer. It is nil when there is
// nothing to report to (no Config.Observer and a logger that drops debug lines), so
// that a router without metrics takes no timestamps at all.
func (r *Router) Observer() Observer {
	if r.tap == nil {
		return nil
	}
	return r.tap
}

// tap is the router's Observer: it logs finished requests at debug level with their
// traceparent, then hands the measurement to the configured Observer.
type tap struct {
	log      *slog.Logger
	next     Observer
	backends []string // names for log lines, when the fleet tells them
}

// backendNamer is a Fleet that can name its backends for log lines.
type backendNamer interface {
	BackendNames() []string
}

func newTap(log *slog.Logger, next Observer, f Fleet) *tap {
	if next == nil && !log.Enabled(context.Background(), slog.LevelDebug) {
		return nil
	}
	t := &tap{log: log, next: next}
	if n, ok := f.(backendNamer); ok {
		t.backends = n.BackendNames()
	}
	return t
}

// FanOutDelivered implements Observer.
func (t *tap) FanOutDelivered(ns int64) {
	if t.next != nil {
		t.next.FanOutDelivered(ns)
	}
}

// RequestDone implements Observer.
func (t *tap) RequestDone(x *transport.Exchange, backend int, o Outcome, start, backendNs int64) {
	if t.next != nil {
		t.next.RequestDone(x, backend, o, start, backendNs)
	}
	if t.log.Enabled(context.Background(), slog.LevelDebug) {
		total := time.Duration(Now() - start)
		if start == 0 {
			total = 0
		}
		name := "router"
		if backend >= 0 && backend < len(t.backends) {
			name = t.backends[backend]
		}
		t.log.Debug("request done", requestAttrs(x,
			slog.String("outcome", o.String()),
			slog.String("backend", name),
			slog.Duration("duration", total),
			slog.Duration("backend_time", time.Duration(backendNs)),
		)...)
	}
}

// logReceived writes the debug line of a request or notification the router took.
func (r *Router) logReceived(x *transport.Exchange) {
	if !r.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	what := "request received"
	if x.Msg.Kind != codec.KindRequest {
		what = "message received"
	}
	r.log.Debug(what, requestAttrs(x, slog.String("transport", x.Carrier.String()))...)
}

// requestAttrs are the attributes every log line about one request carries: method,
// id, session and, when the client sent one, the traceparent. Only called when the line
// will be written: it allocates.
func requestAttrs(x *transport.Exchange, extra ...any) []any {
	attrs := make([]any, 0, 4+len(extra))
	attrs = append(attrs, slog.String("method", string(x.Msg.Method)))
	if x.Msg.ID != nil {
		attrs = append(attrs, slog.String("id", string(x.Msg.ID)))
	}
	if x.Session != nil {
		attrs = append(attrs, slog.String("session", logsafe.Session(x.Session.ID())))
	}
	if tp := TraceParent(x.Msg.Params); tp != "" {
		attrs = append(attrs, slog.String("traceparent", tp))
	}
	return append(attrs, extra...)
}

// TraceParent returns params._meta.traceparent (W3C Trace Context), or "" when absent
// or not a string. The router never rewrites it: forwarding splices only the id, name
// and progress token, so the backend receives the client's traceparent byte for byte.
// It parses, so it is for log lines, not for the forwarding path.
func TraceParent(params []byte) string {
	if len(params) == 0 || params[0] != '{' {
		return ""
	}
	n, err := sonic.Get(params, "_meta", "traceparent")
	if err != nil {
		return ""
	}
	s, err := n.StrictString()
	if err != nil || len(s) > 512 { // bounded: it goes into log lines
		return ""
	}
	return s
}

// observe reports the job's request as finished by the router itself.
func (j *job) observe(o Outcome) {
	if t := j.r.tap; t != nil && j.x.Msg.Kind == codec.KindRequest {
		t.RequestDone(j.x, NoBackend, o, j.start, 0)
	}
}
