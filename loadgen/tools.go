package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/loadgen/internal/wire"
)

// Tool is one tool a server lists.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ListTools opens one session on opts, walks tools/list to its last page (at most
// maxPages) and closes the session: what mcpload shows when it is not told what to
// call, and where it finds a tool's inputSchema when it is not told its arguments.
func ListTools(opts client.Options, timeout time.Duration) ([]Tool, error) {
	d, err := client.NewDialer(opts)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	deadline := time.Now().Add(timeout)
	s, err := d.Dial(0, deadline)
	if err != nil {
		return nil, err
	}
	defer s.Close(deadline)
	var tools []Tool
	var rep client.Reply
	params := []byte(`{}`)
	for range maxPages {
		if err := s.Call(&client.Request{Method: "tools/list", Params: params}, deadline, &rep); err != nil {
			return tools, err
		}
		var page struct {
			Tools []Tool `json:"tools"`
		}
		if err := json.Unmarshal(rep.Result, &page); err != nil {
			return tools, fmt.Errorf("tools/list result: %w", err)
		}
		tools = append(tools, page.Tools...)
		cursor := wire.NextCursor(rep.Result)
		if cursor == nil {
			return tools, nil
		}
		params = wire.AppendMember(nil, []byte(`{}`), "cursor", cursor)
	}
	return tools, errors.New("tools/list: the server's cursors never ended")
}

// FindTool returns the tool named name, or nil.
func FindTool(tools []Tool, name string) *Tool {
	for i := range tools {
		if tools[i].Name == name {
			return &tools[i]
		}
	}
	return nil
}
