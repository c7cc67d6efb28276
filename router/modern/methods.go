package modern

// NameFrom says which params member a method's Mcp-Name header mirrors.
type NameFrom uint8

const (
	NameNone  NameFrom = iota
	NameParam          // params.name (tools/call, prompts/get)
	NameURI            // params.uri (resources/read)
)

// Method describes one client-to-server request of the revision.
type Method struct {
	Name string
	// NameFrom is the member Mcp-Name mirrors; the header is required when it is set.
	NameFrom NameFrom
	// InputRequired: the method may be answered with an InputRequiredResult (mrtr,
	// "Supported Requests"); on no other may a server send one.
	InputRequired bool
	// Cacheable: a complete result carries ttlMs and cacheScope (caching).
	Cacheable bool
	// Extension is the capabilities.extensions key the method belongs to, "" for core.
	Extension string
}

// The methods of 2026-07-28 a client may call. Their order is the table's only.
var methods = [...]Method{
	{Name: "server/discover", Cacheable: true},
	{Name: "tools/list", Cacheable: true},
	{Name: "tools/call", NameFrom: NameParam, InputRequired: true},
	{Name: "resources/list", Cacheable: true},
	{Name: "resources/templates/list", Cacheable: true},
	{Name: "resources/read", NameFrom: NameURI, InputRequired: true, Cacheable: true},
	{Name: "prompts/list", Cacheable: true},
	{Name: "prompts/get", NameFrom: NameParam, InputRequired: true},
	{Name: "completion/complete"},
	{Name: "subscriptions/listen"},
	{Name: "tasks/get", Extension: TasksExtension},
	{Name: "tasks/update", Extension: TasksExtension},
	{Name: "tasks/cancel", Extension: TasksExtension},
}

// Method indexes into methods, for callers that switch on a method without comparing
// strings again.
const (
	MethodDiscover = iota
	MethodToolsList
	MethodToolsCall
	MethodResourcesList
	MethodTemplatesList
	MethodResourcesRead
	MethodPromptsList
	MethodPromptsGet
	MethodComplete
	MethodListen
	MethodTasksGet
	MethodTasksUpdate
	MethodTasksCancel
)

// LookupMethod finds a request method of the revision; nil when the revision has no
// such method (removed ones included: see Removed).
func LookupMethod(name []byte) *Method {
	if i := methodIndex(name); i >= 0 {
		return &methods[i]
	}
	return nil
}

// MethodAt returns the table entry of an index constant (MethodToolsCall...).
func MethodAt(i int) *Method { return &methods[i] }

// methodIndex is the table index of name, -1 if none. A switch on the string compiles
// to a binary search without allocating.
func methodIndex(name []byte) int {
	switch string(name) {
	case "server/discover":
		return MethodDiscover
	case "tools/list":
		return MethodToolsList
	case "tools/call":
		return MethodToolsCall
	case "resources/list":
		return MethodResourcesList
	case "resources/templates/list":
		return MethodTemplatesList
	case "resources/read":
		return MethodResourcesRead
	case "prompts/list":
		return MethodPromptsList
	case "prompts/get":
		return MethodPromptsGet
	case "completion/complete":
		return MethodComplete
	case "subscriptions/listen":
		return MethodListen
	case "tasks/get":
		return MethodTasksGet
	case "tasks/update":
		return MethodTasksUpdate
	case "tasks/cancel":
		return MethodTasksCancel
	}
	return -1
}

// Removed returns, for a request method of the 2025 revisions that 2026-07-28 removed,
// what replaced it (for the -32601 message); "" when name was not removed.
func Removed(name []byte) string {
	switch string(name) {
	case "initialize":
		return "initialize was removed in 2026-07-28: every request carries its version and capabilities in _meta; call server/discover to learn the server"
	case "ping":
		return "ping was removed in 2026-07-28"
	case "logging/setLevel":
		return "logging/setLevel was removed in 2026-07-28: set io.modelcontextprotocol/logLevel in each request's _meta"
	case "resources/subscribe", "resources/unsubscribe":
		return "resources/subscribe and resources/unsubscribe were removed in 2026-07-28: use subscriptions/listen with resourceSubscriptions"
	case "tasks/result", "tasks/list":
		return tasksRemoved
	}
	return ""
}

// tasksRemoved says what became of tasks/result and tasks/list (Removed, and their
// translation rows).
const tasksRemoved = "tasks/result and tasks/list were removed in 2026-07-28 (the tasks extension polls with tasks/get)"
