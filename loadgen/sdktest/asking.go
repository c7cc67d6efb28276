package sdktest

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The asking halves of tools that put server-to-client requests to their client: the
// router's tests of those requests (across protocol generations, across instances)
// serve such tools from a Go SDK server and check what went back and forth.

// nameSchema asks for one string, "name".
var nameSchema = map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}

// ElicitName asks the client of ss for a name (an elicitation of one string) and
// returns it: "" when the client answered without one.
func ElicitName(ctx context.Context, ss *mcp.ServerSession) (string, error) {
	r, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: nameSchema})
	if err != nil {
		return "", err
	}
	name, _ := r.Content["name"].(string)
	return name, nil
}

// ElicitNameNotifying is ElicitName for the client of req, followed, when req carries a
// progress token, by a progress notification "named <name>": a tool whose answer
// comes after a server-to-client request and a notification sent between the two.
func ElicitNameNotifying(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	name, err := ElicitName(ctx, req.Session)
	if err != nil {
		return "", err
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "named " + name})
	}
	return name, nil
}

// AskTwice is a tool handler that asks its client twice: a name (ElicitNameNotifying,
// so with a progress notification in between when the call carries a progress
// token), then a sampling greeting that name; it answers "<name>:<greeting>".
func AskTwice(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	name, err := ElicitNameNotifying(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	text, err := SampleGreeting(ctx, req.Session, name)
	return TextResult(name+":"+text, err)
}

// TextResult is a tool handler's answer: one text, or err when it is not nil.
func TextResult(text string, err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
}

// ErrNoText: the client's sampling answer holds no text.
var ErrNoText = errors.New("sdktest: the sampling answer holds no text")

// SampleGreeting asks the client of ss for a sampling of "greet <name>" and returns the
// text of its answer (ErrNoText when it has none).
func SampleGreeting(ctx context.Context, ss *mcp.ServerSession, name string) (string, error) {
	r, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
		Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "greet " + name}}}})
	if err != nil {
		return "", err
	}
	text, _ := r.Content.(*mcp.TextContent)
	if text == nil {
		return "", ErrNoText
	}
	return text.Text, nil
}
