package dashboards

// Which traffic moves each metric family the dashboards read, and the check that it
// did in a running router. A family that is exported but never moves (an observer
// the fleet never reached, a collector reading one endpoint of several) passes a test
// of names; it fails here.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// tenantToken is the bearer token of the virtual server tenant (withTenant).
const tenantToken = "tenant-token"

// withTenant adds the virtual server tenant: bearer authentication, and a policy that
// denies the tool fail and admits one call of payload an hour.
func withTenant(c *app.Config) {
	sum := sha256.Sum256([]byte(tenantToken))
	c.VirtualServers = []app.VirtualServer{{
		Name: "tenant",
		Auth: auth.Config{Mode: auth.ModeBearer, Resource: "http://127.0.0.1/mcp/tenant",
			BearerTokens: []auth.BearerToken{{Principal: "t", SHA256: hex.EncodeToString(sum[:])}}},
		Policy: policy.Config{
			Rules:  []policy.Rule{{Allow: "true"}, {Deny: `mcp.tool.endsWith("fail")`}},
			Limits: []policy.Limit{{Match: `mcp.tool.endsWith("payload")`, Rate: 1, Per: time.Hour, Burst: 1}},
		},
	}}
}

// countingTransport counts the HTTP requests sent through it.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// tenantTraffic drives the virtual server tenant (withTenant): a request without a
// token, a session whose calls are allowed, denied and rate limited by its policy, a
// message the codec refuses as an invalid request, and a GET stream that has read an
// event, then was resumed (it stays open until ctx ends), and a resumption refused as
// gone. It returns the
// number of HTTP requests it sent.
func (s *stack) tenantTraffic(ctx context.Context) int64 {
	s.t.Helper()
	ct := &countingTransport{}
	c := &mcpraw.Client{URL: s.app.URL() + "/tenant", Version: version, HTTP: &http.Client{Transport: ct, Timeout: waitLimit}}
	if r, err := c.Post(ctx, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); err != nil || r.Status != http.StatusUnauthorized {
		s.t.Fatalf("tenant without a token: %v %v", err, r)
	}
	c.Token = tenantToken
	if r, err := c.Initialize(ctx, ""); err != nil || r.Status != http.StatusOK || c.Session == "" {
		s.t.Fatalf("tenant initialize: %v %v", err, r)
	}
	// call calls tool; a refusal comes with its HTTP status (403 denied, 429 limited).
	call := func(id int, tool, want string) {
		s.t.Helper()
		r, err := c.Post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"demo__%s","arguments":{"text":"x","bytes":1}}}`, id, tool))
		if err != nil || !strings.Contains(string(r.Body), want) {
			s.t.Fatalf("tenant %s: %v %v, want %s", tool, err, r, want)
		}
	}
	call(2, "echo", `"result"`)
	call(3, "fail", `"error"`)     // denied by a rule
	call(4, "payload", `"result"`) // the limit's one call
	call(5, "payload", `"error"`)  // limited
	if r, err := c.Post(ctx, `{"jsonrpc":"2.0","id":6}`); err != nil || r.Status != http.StatusBadRequest {
		s.t.Fatalf("tenant invalid request: %v %v", err, r)
	}
	// get opens the session's GET stream, resuming after lastID when set; its events
	// arrive on the channel, closed when the stream ends.
	get := func(lastID string) (int, <-chan mcpraw.Event) {
		s.t.Helper()
		req := c.NewRequest(ctx, http.MethodGet, "")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := c.Do(req)
		if err != nil {
			s.t.Fatalf("tenant GET: %v", err)
		}
		out := make(chan mcpraw.Event, 64)
		go func() {
			defer resp.Body.Close()
			mcpraw.ReadEvents(resp.Body, out)
		}()
		return resp.StatusCode, out
	}
	_, first := get("")
	if r, err := c.Post(ctx, `{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"counter://tick"}}`); err != nil || r.Status != http.StatusOK {
		s.t.Fatalf("tenant subscribe: %v %v", err, r)
	}
	ev := testwait.Recv(s.t, "an event on the tenant's GET stream", waitLimit, first)
	// A resumption from that event replaces the stream; one from far beyond the
	// stream's end is refused as gone.
	if status, _ := get(ev.ID); status != http.StatusOK {
		s.t.Fatalf("tenant resumption from %s: HTTP %d", ev.ID, status)
	}
	// The replaced stream ends (its end is counted before the client reads it).
	for end, open := time.After(waitLimit), true; open; {
		select {
		case _, open = <-first:
		case <-end:
			s.t.Fatal("the replaced GET stream did not end")
		}
	}
	streamID, _, _ := strings.Cut(ev.ID, "-")
	if status, _ := get(streamID + "-999999999"); status == http.StatusOK {
		s.t.Fatalf("tenant resumption from beyond the stream: HTTP %d", status)
	}
	return ct.n.Load()
}

// modernMeta is the _meta of a 2026-07-28 request (no session: each request says who
// the client is).
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"modern","version":"1"}}`

// modernTraffic drives a 2026-07-28 client, served statelessly (Config.Stateless on):
// a tools/call, and a subscriptions/listen stream for counter://tick, held until ctx
// ends, that has received an update when modernTraffic returns.
func (s *stack) modernTraffic(ctx context.Context) {
	s.t.Helper()
	post := func(method, name, params string) *http.Response {
		s.t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + modernMeta + `}}`
		resp, err := s.cl.Do(mcpraw.NewModernRequest(ctx, s.app.URL(), body, method, name))
		if err != nil || resp.StatusCode != http.StatusOK {
			s.t.Fatalf("2026-07-28 %s: %v %v", method, err, resp)
		}
		return resp
	}
	r := post("tools/call", "demo__echo", `"name":"demo__echo","arguments":{"text":"x"},`)
	r.Body.Close()
	listen := &http.Client{Transport: s.cl.Transport} // no timeout: held until ctx ends
	body := `{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["counter://tick"]},` + modernMeta + `}}`
	resp, err := listen.Do(mcpraw.NewModernRequest(ctx, s.app.URL(), body, "subscriptions/listen", ""))
	if err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("2026-07-28 subscriptions/listen: %v %v", err, resp)
	}
	events := make(chan mcpraw.Event, 64)
	go func() {
		defer resp.Body.Close()
		mcpraw.ReadEvents(resp.Body, events)
	}()
	for end := time.After(waitLimit); ; {
		select {
		case ev, open := <-events:
			if !open {
				s.t.Fatal("the listen stream ended")
			}
			if strings.Contains(ev.Data, "notifications/resources/updated") {
				go func() { // keep reading until ctx ends
					for range events {
					}
				}()
				return
			}
		case <-end:
			s.t.Fatal("no update on the listen stream")
		}
	}
}

// move says what should move one metric family in the stack of
// TestDashboardMetricsExist, and checks that it did. check is nil for a family that
// traffic the shared stack cannot make would move: elsewhere names the test that
// checks it with that traffic, or says why it is not checked.
type move struct {
	why       string
	check     func(exposition string) error
	elsewhere string
}

// atLeast checks that the samples starting with prefix sum to at least n.
func atLeast(prefix string, n float64) func(string) error {
	return func(m string) error {
		if v := metric(m, prefix); v < n {
			return fmt.Errorf("%s = %v, want at least %v", prefix, v, n)
		}
		return nil
	}
}

// equals checks that the samples starting with prefix sum to n.
func equals(prefix string, n float64) func(string) error {
	return func(m string) error {
		if v := metric(m, prefix); v != n {
			return fmt.Errorf("%s = %v, want %v", prefix, v, n)
		}
		return nil
	}
}

// all checks each of checks.
func all(checks ...func(string) error) func(string) error {
	return func(m string) error {
		var errs []string
		for _, c := range checks {
			if err := c(m); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		}
		return nil
	}
}

// trafficFigures are what the test knows of the traffic it made, for the checks that
// need more than "moved".
type trafficFigures struct {
	// httpBefore is mcprouter_http_requests_total before tenantTraffic, tenantRequests
	// the HTTP requests tenantTraffic sent.
	httpBefore, tenantRequests float64
}

// moves is the table of every metric family the dashboards read (a histogram by its
// family name): the traffic of stack.traffic and stack.tenantTraffic that moves it,
// or where it is checked.
func moves(f trafficFigures) map[string]move {
	const (
		outcomes  = "TestRequestOutcomes (a backend timeout and a client's cancellation)"
		readiness = "TestHealthAndReadiness (the backend goes away)"
	)
	return map[string]move{
		"go_goroutines":                 {why: "the Go runtime", check: atLeast("go_goroutines ", 1)},
		"go_memstats_heap_inuse_bytes":  {why: "the Go runtime", check: atLeast("go_memstats_heap_inuse_bytes ", 1)},
		"process_cpu_seconds_total":     {why: "the process", check: atLeast("process_cpu_seconds_total ", 0.001)},
		"process_resident_memory_bytes": {why: "the process", check: atLeast("process_resident_memory_bytes ", 1)},
		"mcprouter_build_info":          {why: "always 1", check: equals("mcprouter_build_info{", 1)},
		"mcprouter_ready":               {why: "the backend is healthy", check: equals("mcprouter_ready ", 1)},

		"mcprouter_requests_total": {why: "requests forwarded, answered by the router, refused", check: all(
			atLeast(`mcprouter_requests_total{backend="demo",method="tools/call",outcome="ok"}`, 1),
			atLeast(`mcprouter_requests_total{backend="router",method="tools/call",outcome="error"}`, 1))},
		"mcprouter_request_router_duration_seconds":  {why: "every request", check: atLeast(`mcprouter_request_router_duration_seconds_count{method="tools/call"}`, 1)},
		"mcprouter_request_backend_duration_seconds": {why: "every forwarded request", check: atLeast(`mcprouter_request_backend_duration_seconds_count{backend="demo",method="tools/call"}`, 1)},
		"mcprouter_requests_in_flight":               {why: "back to 0 when every answer went out", check: equals("mcprouter_requests_in_flight ", 0)},
		"mcprouter_messages_total":                   {why: "every client message", check: atLeast("mcprouter_messages_total ", 10)},
		"mcprouter_notifications_dropped_total":      {elsewhere: "not checked: needs a dispatcher overloaded by notifications"},
		"mcprouter_handler_panics_total":             {elsewhere: "not checked: needs a handler that panics"},
		"mcprouter_codec_errors_total": {why: "a malformed body (main), a message without method (tenant)", check: all(
			atLeast(`mcprouter_codec_errors_total{class="parse"}`, 1),
			atLeast(`mcprouter_codec_errors_total{class="invalid_request"}`, 1))},

		"mcprouter_sessions": {why: "one streamable session and one legacy on the main endpoint, one streamable on tenant", check: all(
			equals(`mcprouter_sessions{revision="2025-06-18",transport="streamable"}`, 2),
			equals(`mcprouter_sessions{revision="2024-11-05",transport="sse"}`, 1))},
		"mcprouter_sessions_initialized_total": {why: "three sessions initialized", check: equals("mcprouter_sessions_initialized_total ", 3)},
		"mcprouter_sessions_budget_used_bytes": {why: "the sessions' records and resumption rings", check: atLeast("mcprouter_sessions_budget_used_bytes ", 1)},
		"mcprouter_sessions_expired_total":     {elsewhere: "not checked here: needs a session idle for sessions.idle_timeout (transport tests count Registry.Expired)"},

		"mcprouter_http_requests_total":             {why: "every HTTP request, the tenant's too", check: atLeast("mcprouter_http_requests_total ", f.httpBefore+f.tenantRequests)},
		"mcprouter_http_rejected_total":             {why: "the malformed body", check: atLeast("mcprouter_http_rejected_total ", 1)},
		"mcprouter_sse_open_streams":                {why: "the GET streams of the main endpoint and tenant, the legacy stream, the 2026-07-28 listen stream", check: equals("mcprouter_sse_open_streams ", 4)},
		"mcprouter_sse_events_total":                {why: "replies and resource updates on streams", check: atLeast("mcprouter_sse_events_total ", 3)},
		"mcprouter_sse_event_bytes_total":           {why: "replies and resource updates on streams", check: atLeast("mcprouter_sse_event_bytes_total ", 100)},
		"mcprouter_sse_written_bytes_total":         {why: "replies and resource updates written to clients", check: atLeast("mcprouter_sse_written_bytes_total ", 100)},
		"mcprouter_sse_queued_bytes":                {why: "0: every client keeps up", check: equals("mcprouter_sse_queued_bytes ", 0)},
		"mcprouter_sse_slow_consumer_cutoffs_total": {elsewhere: "not checked here: needs a client that stops reading past streams.queue_bytes (transport/sse tests count Stats.CutOffs)"},
		"mcprouter_sse_evictions_total":             {elsewhere: "not checked here: needs events past streams.ring_bytes (transport/sse tests count Stats.Evictions)"},
		"mcprouter_sse_resumes_total":               {why: "tenant's GET stream resumed with Last-Event-ID", check: equals("mcprouter_sse_resumes_total ", 1)},
		"mcprouter_sse_resumes_gone_total":          {why: "tenant's resumption from beyond its stream", check: equals("mcprouter_sse_resumes_gone_total ", 1)},
		"mcprouter_sse_keepalives_total":            {why: "the idle legacy stream, with streams.keepalive 20ms", check: atLeast("mcprouter_sse_keepalives_total ", 1)},

		"mcprouter_dispatcher_queued_jobs":          {why: "0 at rest", check: equals("mcprouter_dispatcher_queued_jobs ", 0)},
		"mcprouter_dispatcher_shard_queue_max_jobs": {why: "0 at rest", check: equals("mcprouter_dispatcher_shard_queue_max_jobs ", 0)},
		"mcprouter_workers_running":                 {why: "0 at rest", check: equals("mcprouter_workers_running ", 0)},
		"mcprouter_workers_waiting_jobs":            {why: "0 at rest", check: equals("mcprouter_workers_waiting_jobs ", 0)},
		"mcprouter_workers_capacity":                {why: "the pool's size", check: atLeast("mcprouter_workers_capacity ", 1)},
		"mcprouter_dispatcher_shards":               {why: "the dispatcher's shards", check: atLeast("mcprouter_dispatcher_shards ", 1)},
		"mcprouter_workers_goroutines":              {why: "the pool's live goroutines", check: atLeast("mcprouter_workers_goroutines ", 1)},
		"mcprouter_overload_rejections_total":       {elsewhere: "not checked here: needs a full dispatcher queue (workers tests count Stats.Overloads)"},

		"mcprouter_backend_up":                             {why: "the backend is healthy", check: equals(`mcprouter_backend_up{backend="demo"}`, 1)},
		"mcprouter_backend_instances":                      {why: "one instance configured", check: equals(`mcprouter_backend_instances{backend="demo"}`, 1)},
		"mcprouter_backend_healthy_instances":              {why: "one instance healthy", check: equals(`mcprouter_backend_healthy_instances{backend="demo"}`, 1)},
		"mcprouter_backend_instance_up":                    {why: "one instance healthy", check: equals(`mcprouter_backend_instance_up{backend="demo"`, 1)},
		"mcprouter_backend_in_flight_requests":             {why: "0 at rest (1 during a call: " + outcomes + ")", check: equals(`mcprouter_backend_in_flight_requests{backend="demo"}`, 0)},
		"mcprouter_backend_connects_total":                 {why: "the upstream session", check: atLeast(`mcprouter_backend_connects_total{backend="demo"`, 1)},
		"mcprouter_backend_ejections_total":                {elsewhere: readiness},
		"mcprouter_backend_session_renewals_total":         {elsewhere: "not checked here: needs a backend that forgets its sessions (transport/upstream tests count the renewals)"},
		"mcprouter_backend_restarts_total":                 {elsewhere: "not checked here: needs a stdio backend's child to exit (transport/upstream stdio tests count the restarts)"},
		"mcprouter_backend_forwarded_total":                {why: "calls forwarded", check: atLeast("mcprouter_backend_forwarded_total ", 2)},
		"mcprouter_backend_pooled_calls_total":             {why: "the stack's calls, one at a time: pooled as few_in_flight", check: atLeast(`mcprouter_backend_pooled_calls_total{backend="demo",instance="http://127.0.0.1:`, 2)},
		"mcprouter_backend_pipelined_calls_total":          {elsewhere: "transport/upstream TestPipeStatsReasons, TestPipeStatsFull (calls in flight together, of a kind known short)"},
		"mcprouter_backend_pipeline_saturated":             {elsewhere: "transport/upstream TestPipeStatsSaturated, router/metrics TestCollectPipelining (0 or 1 by the machine's load here)"},
		"mcprouter_scheduler_wait_seconds":                 {elsewhere: "router/metrics TestCollectPipelining (a figure of the machine's load here)"},
		"mcprouter_backend_send_failures_total":            {elsewhere: "not checked: needs a backend connection failing mid-send"},
		"mcprouter_backend_timeouts_total":                 {elsewhere: outcomes},
		"mcprouter_backend_cancellations_total":            {elsewhere: outcomes},
		"mcprouter_backend_failovers_total":                {elsewhere: "not checked: needs a second replica of a backend"},
		"mcprouter_backend_unmatched_responses_total":      {elsewhere: "not checked: needs a backend answering an id it was not sent"},
		"mcprouter_upstream_client_sessions":               {why: "the 2026-07-28 client's capabilities differ from the router's: one upstream session for them", check: equals("mcprouter_upstream_client_sessions ", 1)},
		"mcprouter_upstream_client_sessions_waiting":       {why: "0: no limits.max_upstream_sessions reached", check: equals("mcprouter_upstream_client_sessions_waiting ", 0)},
		"mcprouter_upstream_client_sessions_refused_total": {elsewhere: "not checked: needs limits.max_upstream_sessions reached for limits.upstream_session_wait"},
		"mcprouter_server_requests_expired_total":          {elsewhere: "not checked: needs a backend request (sampling, roots, elicitation) a client leaves unanswered"},
		"mcprouter_server_requests_dropped_total":          {elsewhere: "not checked: needs a client session ending while a backend request to it waits"},
		"mcprouter_backend_catalog_refreshes_total":        {why: "the catalog's first load", check: atLeast("mcprouter_backend_catalog_refreshes_total ", 1)},
		"mcprouter_upstream_subscriptions":                 {why: "one upstream subscription to counter://tick serves both sessions", check: equals("mcprouter_upstream_subscriptions ", 1)},
		"mcprouter_fanout_deliveries_total":                {why: "counter://tick updates reach the subscribed sessions and the listen stream", check: atLeast("mcprouter_fanout_deliveries_total ", 2)},
		"mcprouter_fanout_delivery_seconds":                {why: "each delivery is timed, to the listen stream too (waited for before any session subscribes)", check: atLeast("mcprouter_fanout_delivery_seconds_count ", 2)},

		"mcprouter_nats_connected":          {why: "the router's NATS connection", check: equals("mcprouter_nats_connected ", 1)},
		"mcprouter_nats_messages_total":     {why: "session records and notifications over NATS", check: all(atLeast(`mcprouter_nats_messages_total{direction="in"}`, 1), atLeast(`mcprouter_nats_messages_total{direction="out"}`, 1))},
		"mcprouter_nats_bytes_total":        {why: "session records and notifications over NATS", check: all(atLeast(`mcprouter_nats_bytes_total{direction="in"}`, 1), atLeast(`mcprouter_nats_bytes_total{direction="out"}`, 1))},
		"mcprouter_nats_disconnects_total":  {elsewhere: "not checked here: needs the NATS server to go away (transport/natsbus tests count Bus.Disconnects)"},
		"mcprouter_nats_reconnects_total":   {elsewhere: "not checked here: needs the NATS server to go away and come back (transport/natsbus tests count Bus.Reconnects)"},
		"mcprouter_nats_async_errors_total": {elsewhere: "not checked: needs a slow consumer or a permission violation on NATS"},

		"mcprouter_config_reloads_total":                         {elsewhere: "cmd/mcprouter/app TestReloadRefusedAndFixed (reloads from a configuration file: the counters this family reads)"},
		"mcprouter_config_last_reload_success_timestamp_seconds": {why: "the start", check: atLeast("mcprouter_config_last_reload_success_timestamp_seconds ", 1)},
		"mcprouter_auth_requests_total": {why: "tenant's token accepted, a request without one refused", check: all(
			atLeast(`mcprouter_auth_requests_total{outcome="accepted",reason="ok"}`, 5),
			atLeast(`mcprouter_auth_requests_total{outcome="refused",reason="missing"}`, 1))},
		"mcprouter_policy_decisions_total": {why: "tenant's calls allowed, and denied by its rule", check: all(
			atLeast(`mcprouter_policy_decisions_total{outcome="allowed"}`, 2),
			atLeast(`mcprouter_policy_decisions_total{outcome="denied"}`, 1))},
		"mcprouter_policy_limited_total":          {why: "tenant's second payload call", check: atLeast("mcprouter_policy_limited_total ", 1)},
		"mcprouter_endpoint_requests_total":       {why: "requests of both endpoints", check: all(atLeast(`mcprouter_endpoint_requests_total{endpoint="(main)",outcome="ok"}`, 1), atLeast(`mcprouter_endpoint_requests_total{endpoint="tenant",outcome="ok"}`, 2))},
		"mcprouter_endpoint_policy_denied_total":  {why: "tenant's denied call", check: equals(`mcprouter_endpoint_policy_denied_total{endpoint="tenant"}`, 1)},
		"mcprouter_endpoint_policy_limited_total": {why: "tenant's limited call", check: equals(`mcprouter_endpoint_policy_limited_total{endpoint="tenant"}`, 1)},
		"mcprouter_endpoint_sessions":             {why: "two sessions on the main endpoint, one on tenant", check: all(equals(`mcprouter_endpoint_sessions{endpoint="(main)"}`, 2), equals(`mcprouter_endpoint_sessions{endpoint="tenant"}`, 1))},
	}
}

// familyOf maps a name a query reads to its family in table: a histogram's _bucket,
// _count and _sum are its family.
func familyOf(name string, table map[string]move) string {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if f, ok := strings.CutSuffix(name, suffix); ok {
			if _, known := table[f]; known {
				return f
			}
		}
	}
	return name
}
