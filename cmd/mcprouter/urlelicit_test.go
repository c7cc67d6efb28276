package main

// URL elicitation across eras, over raw HTTP through the router binary: a 2025 backend's
// -32042 (URL elicitation required; the reference backend's fail_rpc with a url) reaches
// a 2026-07-28 client as the revision has it, since 2026-07-28 forbids the code.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

// TestStatelessURLElicitation: the error becomes an input_required result holding one
// URL-mode elicitation/create and the router's requestState; an accepted retry sends
// the original request to the backend again (which, still wanting the URL, answers
// -32042 again: a fresh input_required); a declined one gets an error saying so; a
// client that did not declare URL-mode elicitation gets -32021 naming it. Never -32042.
func TestStatelessURLElicitation(t *testing.T) {
	testbin.Long(t, "starts processes")
	p := startRouterFor(t, startEraBackend(t, "legacy"))
	const args = `{"message":"bad","code":-32042,"url":"https://pay.example/o/1"}`
	meta := func(caps string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	urlMeta := meta(`{"elicitation":{"form":{},"url":{}}}`)
	asked := func(what string, status int, a mcpraw.Answer) (key, state string) {
		t.Helper()
		if status != 200 || a.Error != nil || a.Result.ResultType != "input_required" || len(a.Result.InputRequests) != 1 ||
			!strings.HasPrefix(a.Result.RequestState, "mcprouter:") {
			t.Fatalf("%s: %d %+v, want input_required with one input request and the router's requestState", what, status, a)
		}
		for k, v := range a.Result.InputRequests {
			var r struct {
				Method string
				Params struct{ Mode, Message, URL string }
			}
			if json.Unmarshal(v, &r) != nil || r.Method != "elicitation/create" || r.Params.Mode != "url" ||
				r.Params.URL != "https://pay.example/o/1" || r.Params.Message == "" {
				t.Fatalf("%s: input request %s, want a URL-mode elicitation/create of the backend's URL", what, v)
			}
			key = k
		}
		return key, a.Result.RequestState
	}
	answer := func(key, action, state string) string {
		return `,"inputResponses":{"` + key + `":{"action":"` + action + `"}},"requestState":"` + state + `"`
	}

	status, a := toolCallAs(t, p, "", "fail_rpc", args, urlMeta)
	key, state := asked("the call", status, a)
	status, a = toolCallAs(t, p, "", "fail_rpc", args, urlMeta+answer(key, "accept", state))
	key2, state2 := asked("the accepted retry", status, a)
	if state2 == state {
		t.Fatal("the accepted retry was answered the same state: the backend was not asked again")
	}
	status, a = toolCallAs(t, p, "", "fail_rpc", args, urlMeta+answer(key2, "decline", state2))
	if a.Error == nil || a.Error.Code == -32042 || !strings.Contains(a.Error.Message, "did not accept the URL elicitation") {
		t.Fatalf("declined retry: %d %+v, want an error saying the user did not accept", status, a)
	}
	status, a = toolCallAs(t, p, "", "fail_rpc", args, meta(`{"elicitation":{}}`))
	if status != 400 || a.Error == nil || a.Error.Code != -32021 || !strings.Contains(a.Error.Message, "elicitation.url") {
		t.Fatalf("client without URL-mode elicitation: %d %+v, want -32021 naming elicitation.url", status, a)
	}
	// Without elicitations in its data the error cannot be reshaped: still not -32042.
	status, a = toolCallAs(t, p, "", "fail_rpc", `{"message":"bad","code":-32042}`, urlMeta)
	if a.Error == nil || a.Error.Code != -32603 || !strings.Contains(a.Error.Message, "-32042") {
		t.Fatalf("-32042 without elicitations: %d %+v, want an internal error naming it", status, a)
	}
}
