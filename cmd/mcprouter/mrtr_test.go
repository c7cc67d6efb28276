package main

// A 2026-07-28 client in front of a 2025 backend that asks it something (issue 12's
// translation), over raw HTTP: the input_required result the router answers, the retry
// that completes the call, and every requestState the router refuses, each with its own
// clear error and nothing left waiting upstream.

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

// sampleMeta is a per-request _meta declaring the sampling capability.
const sampleMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`

// sampleCall posts a tools/call of the backend's sample tool with prompt, and extra
// params members (the retry's), and returns the status and the answer.
func sampleCall(t *testing.T, p *routerProc, prompt, extra string) (int, mcpraw.Answer) {
	return sampleCallAs(t, p, "", prompt, extra)
}

// sampleCallAs is sampleCall presenting the bearer token (none when "").
func sampleCallAs(t *testing.T, p *routerProc, token, prompt, extra string) (int, mcpraw.Answer) {
	t.Helper()
	return toolCallAs(t, p, token, "sample", `{"prompt":"`+prompt+`"}`, sampleMeta+extra)
}

// toolCallAs posts a 2026-07-28 tools/call of tool with arguments args and the further
// params members rest (its _meta, a retry's members), presenting the bearer token (none
// when ""), and returns the status and the answer.
func toolCallAs(t *testing.T, p *routerProc, token, tool, args, rest string) (int, mcpraw.Answer) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + rest + `}}`
	resp := postModernAs(t, p, token, body, "tools/call", tool)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// A JSON body, or the last data line of an SSE stream.
	data := raw
	if m := sseData.FindAllSubmatch(raw, -1); len(m) > 0 {
		data = m[len(m)-1][1]
	}
	var a mcpraw.Answer
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("answer %q: %v", raw, err)
	}
	return resp.StatusCode, a
}

var sseData = regexp.MustCompile(`(?m)^data: (\{.*\})\r?$`)

// retryParams are the retry's members: the answer to key and the state.
func retryParams(key, text, state string) string {
	return `,"inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"` + text + `"}}},"requestState":"` + state + `"`
}

// askSample calls sample and returns the input request's key and the state.
func askSample(t *testing.T, p *routerProc, prompt string) (key, state string) {
	t.Helper()
	return askSampleAs(t, p, "", prompt)
}

// askSampleAs is askSample presenting the bearer token.
func askSampleAs(t *testing.T, p *routerProc, token, prompt string) (key, state string) {
	t.Helper()
	status, a := sampleCallAs(t, p, token, prompt, "")
	if status != 200 || a.Error != nil || a.Result.ResultType != "input_required" || len(a.Result.InputRequests) != 1 || a.Result.RequestState == "" {
		t.Fatalf("sample: %d %+v, want input_required with one input request and a requestState", status, a)
	}
	for k, v := range a.Result.InputRequests {
		if !strings.Contains(string(v), `"method":"sampling/createMessage"`) || !strings.Contains(string(v), prompt) {
			t.Fatalf("input request %s: %s, want the backend's sampling/createMessage", k, v)
		}
		key = k
	}
	return key, a.Result.RequestState
}

// wantText fails the test unless the answer (to what) is a 200 result whose first
// content is text: the backend's result, made with the client's answer.
func wantText(t *testing.T, what string, status int, a mcpraw.Answer, text string) {
	t.Helper()
	if status != 200 || a.Error != nil || len(a.Result.Content) == 0 || a.Result.Content[0].Text != text {
		t.Fatalf("%s: %d %+v, want the backend's result %q", what, status, a, text)
	}
}

// wantInvalidParams fails the test unless the answer (to what) is a 400 with an
// invalid params error (-32602) whose message says each of says.
func wantInvalidParams(t *testing.T, what string, status int, a mcpraw.Answer, says ...string) {
	t.Helper()
	ok := status == 400 && a.Error != nil && a.Error.Code == -32602
	for _, s := range says {
		ok = ok && strings.Contains(a.Error.Message, s)
	}
	if !ok {
		t.Fatalf("%s: %d %+v, want invalid params saying %q", what, status, a, says)
	}
}

// tampered is state with one byte of its sealed part changed (byte 40: past
// "mcprouter:" and the owner).
func tampered(state string) string {
	b := []byte(state)
	if b[40] == 'A' {
		b[40] = 'B'
	} else {
		b[40] = 'A'
	}
	return string(b)
}

// retryOnce asks the sample tool on owner and retries on retrier with text: the retry
// gets the backend's result, and the same state again is refused as answered already.
func retryOnce(t *testing.T, owner, retrier *routerProc, text string) {
	t.Helper()
	key, state := askSample(t, owner, "hi")
	status, a := sampleCall(t, retrier, "hi", retryParams(key, text, state))
	wantText(t, "retry", status, a, text)
	// The same state again: its request is over (on its owner).
	status, a = sampleCall(t, retrier, "hi", retryParams(key, text, state))
	wantInvalidParams(t, "replayed state", status, a, "answered already")
}

func TestInputRequiredTranslation(t *testing.T) {
	testbin.Long(t, "starts processes")
	p := startRouterFor(t, startEraBackend(t, "legacy"))

	t.Run("retry completes the call", func(t *testing.T) { retryOnce(t, p, p, "hello") })

	refusals := []struct {
		name   string
		prompt string // of the retry
		state  func(string) string
		want   string
	}{
		{"tampered", "hi", tampered, "failed verification"},
		{"not base64", "hi", func(string) string { return "mcprouter:%%%" }, "failed verification"},
		{"another request", "other", func(s string) string { return s }, "another request"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			key, state := askSample(t, p, "hi")
			status, a := sampleCall(t, p, tc.prompt, retryParams(key, "x", tc.state(state)))
			wantInvalidParams(t, tc.name, status, a, tc.want)
			// The parked request is still there for the right retry.
			status, a = sampleCall(t, p, "hi", retryParams(key, "ok", state))
			wantText(t, "retry after a refused one", status, a, "ok")
		})
	}

	t.Run("no answer for the key", func(t *testing.T) {
		_, state := askSample(t, p, "hi")
		status, a := sampleCall(t, p, "hi", retryParams("nope", "x", state))
		wantInvalidParams(t, "retry without the answer", status, a, "no answer for")
	})
}

// TestInputRequiredPrincipal: a requestState is bound to the principal it was issued
// to: another one's retry is refused and the call still waits for the right one. (Its
// expiry is checked with the sealer's clock moved, without waiting:
// router/fleet TestOpenState.)
func TestInputRequiredPrincipal(t *testing.T) {
	testbin.Long(t, "starts processes")
	p := startAliceBobRouter(t, startEraBackend(t, "legacy"), "")

	key, state := askSampleAs(t, p, aliceToken, "hi")
	status, a := sampleCallAs(t, p, bobToken, "hi", retryParams(key, "x", state))
	wantInvalidParams(t, "bob retrying alice's state", status, a, "another principal")
	status, a = sampleCallAs(t, p, aliceToken, "hi", retryParams(key, "mine", state))
	wantText(t, "alice's retry", status, a, "mine")
}
