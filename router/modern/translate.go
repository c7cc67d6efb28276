package modern

import "github.com/mcprouter/mcprouter/codec"

// The translation tables between the 2025 revisions (2024-11-05 to 2025-11-25, the
// "legacy" era) and 2026-07-28. They are data: the router answers from them where a row
// is its answer (MethodNotFound gives an unmappable request's reason, DroppedForModern
// the notifications dropped, ErrorToModern and ErrorToLegacy the codes), and the tests
// check they cover every method of both and hold the other rows to what the router
// does (the fleet's tests of each translation).

// How says what translating a message takes.
type How uint8

const (
	// Same: the message passes with its name; only _meta (and resultType) change.
	Same How = iota
	// Renamed: the other era has an equivalent under another name.
	Renamed
	// Local: the router answers or absorbs it itself (ping, logging/setLevel...).
	Local
	// Reshaped: the other era carries the same meaning in another shape (a
	// server-to-client request inside an InputRequiredResult, a subscription on a
	// subscriptions/listen stream).
	Reshaped
	// Unmappable: the other era has nothing that means it; Rationale says what the
	// router answers.
	Unmappable
	// Unrouted: both eras have it, and the router routes it in neither (Rationale says
	// why, and is the message of the -32601 it answers).
	Unrouted
)

// Direction says who sends a message.
type Direction uint8

const (
	ClientToServer Direction = iota
	ServerToClient
)

// Kind of a translated message.
type MsgKind uint8

const (
	Request MsgKind = iota
	Notification
)

// Mapping is one row of the tables: a method of one era, its counterpart (empty when
// none), how, and why.
type Mapping struct {
	Legacy    string // the 2025 method; "" for a method 2026-07-28 introduced
	Modern    string // the 2026-07-28 method; "" for one it removed
	Dir       Direction
	Kind      MsgKind
	How       How
	Rationale string
}

// Mappings is the table. Legacy → modern is read for a 2025 client in front of a 2026
// backend, and modern → legacy for the opposite; a row serves both.
var Mappings = [...]Mapping{
	// Client to server requests.
	{"initialize", "server/discover", ClientToServer, Request, Reshaped,
		"the router answers initialize itself; upstream it calls server/discover once per backend, and the session's version, capabilities and client info go into every request's _meta"},
	{"ping", "", ClientToServer, Request, Local,
		"removed in 2026-07-28: the router answers a 2025 client's ping itself"},
	{"logging/setLevel", "", ClientToServer, Request, Local,
		"removed in 2026-07-28: the router keeps the session's level and sends it as _meta logLevel on each request"},
	{"resources/subscribe", "subscriptions/listen", ClientToServer, Request, Reshaped,
		"the URI joins the resourceSubscriptions of the router's one subscriptions/listen stream per backend"},
	{"resources/unsubscribe", "subscriptions/listen", ClientToServer, Request, Reshaped,
		"the URI leaves the router's listen stream (re-opened with the smaller filter)"},
	{"tools/list", "tools/list", ClientToServer, Request, Same, ""},
	{"tools/call", "tools/call", ClientToServer, Request, Same,
		"an input_required answer becomes server-to-client requests on the 2025 session, and the router retries"},
	{"resources/list", "resources/list", ClientToServer, Request, Same, ""},
	{"resources/templates/list", "resources/templates/list", ClientToServer, Request, Same, ""},
	{"resources/read", "resources/read", ClientToServer, Request, Same,
		"an input_required answer becomes server-to-client requests on the 2025 session, and the router retries"},
	{"prompts/list", "prompts/list", ClientToServer, Request, Same, ""},
	{"prompts/get", "prompts/get", ClientToServer, Request, Same,
		"an input_required answer becomes server-to-client requests on the 2025 session, and the router retries"},
	{"completion/complete", "completion/complete", ClientToServer, Request, Same, ""},
	{"", "subscriptions/listen", ClientToServer, Request, Reshaped,
		"toward a 2025 backend: the router's GET stream and resources/subscribe feed the listen stream through the cluster's fan-out"},
	// The tasks extension: the router routes none of its requests (TasksNotRouted), and
	// answers each with -32601 and the reasons of its row (MethodNotFound).
	{"tasks/get", "tasks/get", ClientToServer, Request, Unrouted, TasksNotRouted},
	{"tasks/cancel", "tasks/cancel", ClientToServer, Request, Unrouted, TasksNotRouted},
	{"tasks/result", "", ClientToServer, Request, Unmappable, tasksRemoved},
	{"tasks/list", "", ClientToServer, Request, Unmappable, tasksRemoved},
	{"", "tasks/update", ClientToServer, Request, Unmappable,
		"tasks/update is new in 2026-07-28: 2025 tasks take no input from the client"},

	// Client to server notifications.
	{"notifications/initialized", "", ClientToServer, Notification, Local, "no handshake in 2026-07-28: absorbed"},
	{"notifications/cancelled", "notifications/cancelled", ClientToServer, Notification, Same,
		"on Streamable HTTP a 2026 client closes the response stream instead: the router sends notifications/cancelled to a 2025 backend"},
	{"notifications/roots/list_changed", "", ClientToServer, Notification, Local,
		"removed in 2026-07-28: roots are asked again through input_required each time; absorbed"},
	{"notifications/progress", "notifications/progress", ClientToServer, Notification, Same, ""},

	// Server to client requests.
	{"sampling/createMessage", "sampling/createMessage", ServerToClient, Request, Reshaped,
		"a 2025 backend's request becomes an inputRequests entry of an InputRequiredResult with a sealed requestState; the client's inputResponses answer it"},
	{"elicitation/create", "elicitation/create", ServerToClient, Request, Reshaped,
		"as sampling/createMessage; in URL mode the client must have declared elicitation.url, and a 2025 client gets the elicitationId its revision requires (the router's own)"},
	{"roots/list", "roots/list", ServerToClient, Request, Reshaped,
		"as sampling/createMessage"},
	{"ping", "", ServerToClient, Request, Local, "a 2025 backend's ping is answered by the router"},

	// Server to client notifications.
	{"notifications/message", "notifications/message", ServerToClient, Notification, Same,
		"to a 2026 client only when its request carried a logLevel, and at or above it"},
	{"notifications/progress", "notifications/progress", ServerToClient, Notification, Same, ""},
	{"notifications/resources/updated", "notifications/resources/updated", ServerToClient, Notification, Reshaped,
		"to a 2026 client only on a subscriptions/listen stream that asked for the URI, with its subscriptionId"},
	{"notifications/resources/list_changed", "notifications/resources/list_changed", ServerToClient, Notification, Reshaped,
		"on a listen stream with resourcesListChanged"},
	{"notifications/tools/list_changed", "notifications/tools/list_changed", ServerToClient, Notification, Reshaped,
		"on a listen stream with toolsListChanged"},
	{"notifications/prompts/list_changed", "notifications/prompts/list_changed", ServerToClient, Notification, Reshaped,
		"on a listen stream with promptsListChanged"},
	{"notifications/elicitation/complete", "", ServerToClient, Notification, Unmappable,
		"removed in 2026-07-28: the client learns the outcome by retrying; dropped (DroppedForModern)"},
	{"", "notifications/subscriptions/acknowledged", ServerToClient, Notification, Local,
		"from a 2026 backend: consumed by the router, which acknowledges its own listeners"},
	{"notifications/cancelled", "notifications/cancelled", ServerToClient, Notification, Local,
		"2026 servers send it only to end a listen stream: the router ends its own listeners' streams"},
}

// TasksNotRouted is why the router answers every request of the tasks extension with
// -32601, in either era: a task id names no backend, and the router keeps no map from
// the tasks backends made to the backends that made them.
const TasksNotRouted = "the router does not route the tasks extension's requests: a task id names no backend, and the router keeps no record of which backend made a task"

// MethodNotFound is the message of the -32601 the router answers a client request it
// routes to no backend: the method, and for a method of the table that cannot be
// mapped or is not routed, why (its row's Rationale, and TasksNotRouted for the tasks
// extension's removed methods too).
func MethodNotFound(method []byte) string {
	r := ToModern(method, ClientToServer, Request)
	if r == nil {
		r = ToLegacy(method, ClientToServer, Request)
	}
	switch {
	case r == nil || (r.How != Unmappable && r.How != Unrouted):
		return "Method not found: " + string(method)
	case r.How == Unmappable && len(method) > len("tasks/") && string(method[:len("tasks/")]) == "tasks/":
		return "Method not found: " + string(method) + ": " + r.Rationale + "; and " + TasksNotRouted
	}
	return "Method not found: " + string(method) + ": " + r.Rationale
}

// DroppedForModern reports whether a notification a 2025 backend sends is dropped on its
// way to a 2026-07-28 client (the Unmappable server-to-client notification rows): a
// switch, for the backend's every notification, that TestDroppedForModern holds to the
// table.
func DroppedForModern(method []byte) bool {
	return string(method) == "notifications/elicitation/complete"
}

// ToModern finds the row of a 2025 method sent in direction dir.
func ToModern(method []byte, dir Direction, kind MsgKind) *Mapping {
	return lookup(method, dir, kind, false)
}

// ToLegacy finds the row of a 2026-07-28 method sent in direction dir.
func ToLegacy(method []byte, dir Direction, kind MsgKind) *Mapping {
	return lookup(method, dir, kind, true)
}

// lookup finds the row whose 2025 (or, modern set, 2026-07-28) method is method.
func lookup(method []byte, dir Direction, kind MsgKind, modern bool) *Mapping {
	for i := range Mappings {
		r := &Mappings[i]
		name := r.Legacy
		if modern {
			name = r.Modern
		}
		if r.Dir == dir && r.Kind == kind && name != "" && name == string(method) {
			return r
		}
	}
	return nil
}

// CodeMapping is one error code's translation.
type CodeMapping struct {
	Legacy, Modern int
	Rationale      string
}

// CodeMappings lists the error codes that differ between the eras; every other code
// (JSON-RPC's own, the router's -32000..-32018) means the same in both and passes.
var CodeMappings = [...]CodeMapping{
	{codec.CodeResourceNotFound, codec.CodeInvalidParams,
		"2026-07-28 renumbered resource not found to -32602 and forbids emitting -32002"},
	{codec.CodeURLElicitationRequired, 0,
		"2025-11-25's URL elicitation required is an InputRequiredResult with a URL-mode elicitation in 2026-07-28: the fleet reshapes it (router.ErrorReshaper; the accepted retry sends the original request again), and the code never reaches a 2026 client (one without URL-mode elicitation gets -32021)"},
	{codec.CodeInvalidParams, codec.CodeHeaderMismatch,
		"a 2026 backend's header mismatch is the router's own fault toward it: a 2025 client sees invalid params"},
	{codec.CodeInvalidParams, codec.CodeMissingCapability,
		"a 2025 client declared its capabilities at initialize: it sees invalid params, with the required capabilities in the message"},
	{codec.CodeInternalError, codec.CodeUnsupportedVersion,
		"the router chooses the version it speaks upstream: a backend refusing it is an internal error toward a 2025 client (the router re-discovers the backend)"},
}

// ErrorToModern translates a 2025 backend's error code for a 2026 client; reshape is
// true when the error must become an InputRequiredResult instead.
func ErrorToModern(code int) (out int, reshape bool) {
	switch code {
	case codec.CodeResourceNotFound:
		return codec.CodeInvalidParams, false
	case codec.CodeURLElicitationRequired:
		return 0, true
	}
	return code, false
}

// ErrorToLegacy translates a 2026 backend's error code for a 2025 client.
func ErrorToLegacy(code int) int {
	switch code {
	case codec.CodeHeaderMismatch, codec.CodeMissingCapability:
		return codec.CodeInvalidParams
	case codec.CodeUnsupportedVersion:
		return codec.CodeInternalError
	}
	return code
}
