package sdktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectAsked connects a 2025-11-25 client (one a server may send requests to while it
// serves one) that answers elicitations with name and samplings with content to a server
// over in-memory transports, and returns the server's side.
func connectAsked(t *testing.T, ctx context.Context, name string, content mcp.Content) *mcp.ServerSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "answerer", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: content}, nil
		},
	})
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return ss
}

// TestAsking: ElicitName returns the name the client gave, SampleGreeting the text the
// client sampled, and ErrNoText when the client's answer is not text.
func TestAsking(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ss := connectAsked(t, ctx, "Ann", &mcp.TextContent{Text: "hello Ann"})
	if name, err := ElicitName(ctx, ss); err != nil || name != "Ann" {
		t.Errorf("ElicitName = %q, %v; want Ann", name, err)
	}
	if text, err := SampleGreeting(ctx, ss, "Ann"); err != nil || text != "hello Ann" {
		t.Errorf("SampleGreeting = %q, %v; want hello Ann", text, err)
	}
	ss = connectAsked(t, ctx, "", &mcp.ImageContent{Data: []byte{1}, MIMEType: "image/png"})
	if text, err := SampleGreeting(ctx, ss, "Ann"); !errors.Is(err, ErrNoText) {
		t.Errorf("SampleGreeting of an image = %q, %v; want ErrNoText", text, err)
	}
}
