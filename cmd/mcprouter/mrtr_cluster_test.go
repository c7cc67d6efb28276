package main

// A 2026-07-28 client's retry that lands on another router instance than the one that
// answered input_required (issue 12: "route it to the owner over NATS"): real router
// processes on one NATS, a 2025 backend whose sample tool asks the client, raw HTTP.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// clusterToken is the embedded NATS server's client token in these tests.
const clusterToken = "mrtr-cluster-token"

// startMRTRNode starts a router in front of the backend at backend, joined to the NATS
// at natsURL ("": its own embedded server, listening for the others), with the
// requestState secret in file keyFile ("": none).
func startMRTRNode(t *testing.T, backend, natsURL, keyFile string) *routerProc {
	t.Helper()
	return startMRTRNodeWith(t, backend, natsURL, keyFile, "")
}

// startMRTRNodeWith is startMRTRNode with more configuration (YAML lines) and
// arguments.
func startMRTRNodeWith(t *testing.T, backend, natsURL, keyFile, more string, args ...string) *routerProc {
	t.Helper()
	// A short grace: an instance stopped with a call parked (owner gone) would wait
	// for it.
	cfg := fmt.Sprintf("stateless: on\nshutdown_grace: 1s\nbackends:\n  - name: b\n    prefix: \"\"\n    era: \"2025\"\n    url: http://%s/mcp\n", backend)
	if natsURL == "" {
		cfg += "nats:\n  listen: 127.0.0.1:0\n  token: " + clusterToken + "\n"
	} else {
		cfg += "nats:\n  url: " + natsURL + "\n  token: " + clusterToken + "\n"
	}
	if keyFile != "" {
		cfg += "request_state:\n  key_file: " + keyFile + "\n"
	}
	return startRouter(t, append([]string{"--config", writeConfig(t, cfg+more)}, args...)...)
}

// natsURLOf is the client URL of p's embedded NATS server.
func natsURLOf(t *testing.T, p *routerProc) string {
	t.Helper()
	url := p.Log.Value("embedded NATS accepting clients", "url")
	if url == "" {
		t.Fatalf("no NATS client URL in the log:\n%s", p.Log)
	}
	return url
}

// TestInputRequiredOtherInstance: with the cluster's requestState secret, a retry sent
// to instance B of a state instance A issued reaches A over NATS and gets the tool's
// result; B still refuses a tampered state itself; a state whose owner is gone gets a
// clear error at once. Without the secret B refuses the state, saying why.
func TestInputRequiredOtherInstance(t *testing.T) {
	testbin.Long(t, "starts processes")
	backend := startEraBackend(t, "legacy")
	keyFile := filepath.Join(t.TempDir(), "state.key")
	if err := os.WriteFile(keyFile, []byte("an-e2e-secret-of-more-than-32-characters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startMRTRNode(t, backend, "", keyFile)
	url := natsURLOf(t, a)
	b := startMRTRNode(t, backend, url, keyFile)

	t.Run("retry on the other instance", func(t *testing.T) { retryOnce(t, a, b, "hello from b") })
	t.Run("both ways", func(t *testing.T) { retryOnce(t, b, a, "hello from a") })

	t.Run("tampered on the other instance", func(t *testing.T) {
		key, state := askSample(t, a, "hi")
		status, res := sampleCall(t, b, "hi", retryParams(key, "x", tampered(state)))
		wantInvalidParams(t, "tampered state on b", status, res, "failed verification")
		// Another request's state, too, is refused by b.
		status, res = sampleCall(t, b, "other", retryParams(key, "x", state))
		wantInvalidParams(t, "another request's state on b", status, res, "another request")
		// The call still waits on a for the right retry.
		status, res = sampleCall(t, b, "hi", retryParams(key, "ok", state))
		wantText(t, "retry after the refused ones", status, res, "ok")
	})

	t.Run("owner gone", func(t *testing.T) {
		c := startMRTRNode(t, backend, url, keyFile)
		key, state := askSample(t, c, "bye")
		c.stop(t)
		status, res := sampleCall(t, b, "bye", retryParams(key, "x", state))
		if res.Error == nil || !strings.Contains(res.Error.Message, "is gone") {
			t.Fatalf("retry of a gone instance's state: %d %+v, want an error saying its owner is gone", status, res)
		}
	})

	t.Run("no shared secret", func(t *testing.T) {
		d := startMRTRNode(t, backend, url, "")
		key, state := askSample(t, a, "hi")
		status, res := sampleCall(t, d, "hi", retryParams(key, "x", state))
		wantInvalidParams(t, "retry on an instance without the secret", status, res, "another router instance", "request_state")
	})
}

// TestInputRequiredOtherInstanceAuth: with authenticated clients, the retry routed to
// the owner carries its principal: alice's retry on B gets her call's result, with the
// progress the backend reported on the owner on B's SSE stream before it; bob's retry of
// alice's state is refused by B.
func TestInputRequiredOtherInstanceAuth(t *testing.T) {
	testbin.Long(t, "starts processes")
	backend := startAskingBackend(t)
	keyFile := filepath.Join(t.TempDir(), "state.key")
	if err := os.WriteFile(keyFile, []byte("another-e2e-secret-of-more-than-32-characters"), 0o600); err != nil {
		t.Fatal(err)
	}
	node := func(natsURL string) *routerProc {
		addr := testbin.FreeAddr(t)
		return startMRTRNodeWith(t, backend, natsURL, keyFile, aliceBobAuth(addr), "--listen", addr)
	}
	a := node("")
	b := node(natsURLOf(t, a))

	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":"pt-1"}`
	status, first := toolCallAs(t, a, aliceToken, "ask_progress", `{}`, meta)
	if status != 200 || first.Error != nil || first.Result.ResultType != "input_required" || len(first.Result.InputRequests) != 1 {
		t.Fatalf("alice's call on a: %d %+v, want input_required", status, first)
	}
	var key string
	for k := range first.Result.InputRequests {
		key = k
	}
	retry := meta + `,"inputResponses":{"` + key + `":{"action":"accept","content":{"name":"Ann"}}},"requestState":"` + first.Result.RequestState + `"`

	status, got := toolCallAs(t, b, bobToken, "ask_progress", `{}`, retry)
	wantInvalidParams(t, "bob retrying alice's state on b", status, got, "another principal")

	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_progress","arguments":{},` + retry + `}}`
	resp := postModernAs(t, b, aliceToken, body, "tools/call", "ask_progress")
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	stream := string(raw)
	progress := strings.Index(stream, `"notifications/progress"`)
	result := strings.Index(stream, `"text":"Ann"`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || progress < 0 || result < progress ||
		!strings.Contains(stream, `"progressToken":"pt-1"`) || !strings.Contains(stream, `"named Ann"`) {
		t.Fatalf("alice's retry on b: %d %s\n%s\nwant an SSE stream with the owner's progress, then the result", resp.StatusCode, resp.Header.Get("Content-Type"), stream)
	}
}
