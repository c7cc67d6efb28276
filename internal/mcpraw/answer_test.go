package mcpraw_test

import (
	"encoding/json"
	"testing"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
)

// TestAnswer: an input_required result, a tool's text result and an error each fill
// the members the tests read.
func TestAnswer(t *testing.T) {
	var ask, done, failed mcpraw.Answer
	for _, c := range []struct {
		body string
		into *mcpraw.Answer
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"k":{"method":"sampling/createMessage"}},"requestState":"s"}}`, &ask},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`, &done},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"answered already"}}`, &failed},
	} {
		if err := json.Unmarshal([]byte(c.body), c.into); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
	}
	if ask.Result.ResultType != "input_required" || ask.Result.RequestState != "s" || string(ask.Result.InputRequests["k"]) != `{"method":"sampling/createMessage"}` || ask.Error != nil {
		t.Errorf("input_required: %+v", ask)
	}
	if len(done.Result.Content) != 1 || done.Result.Content[0].Text != "hi" || done.Error != nil {
		t.Errorf("text result: %+v", done)
	}
	if failed.Error == nil || failed.Error.Code != -32602 || failed.Error.Message != "answered already" {
		t.Errorf("error: %+v", failed)
	}
}
