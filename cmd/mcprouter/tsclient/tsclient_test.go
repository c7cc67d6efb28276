package tsclient

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// node finds Node and the TypeScript SDK (v1) that .ci/deps.sh installs; without them
// the test skips outside CI and fails in CI.
func node(t *testing.T) (bin, sdk string) {
	bin, pkgs := testbin.Node(t, "@modelcontextprotocol/sdk")
	return bin, pkgs[0]
}

// runScript runs testdata/name with Node (for at most a minute) and decodes the JSON
// it prints; a failed run fails the test with its output and stderr.
func runScript[T any](t *testing.T, nodeBin, name string, args ...string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, nodeBin, append([]string{script}, args...)...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("client: %v\n%s\n%s", err, out, msg)
	}
	var r T
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	return r
}

type result struct {
	Negotiated string `json:"negotiated"`
	Server     string `json:"server"`
	Tools      int    `json:"tools"`
	Echo       string `json:"echo"`
}

func TestTypeScriptClient(t *testing.T) {
	testbin.Long(t, "starts processes and Node")
	nodeBin, sdk := node(t)
	bin := testbin.Build(t, testbin.Router)
	// No configuration: the router runs its two reference backends in-process.
	addr := testbin.StartRouter(t, "--listen", "127.0.0.1:0").Addr()

	// The TypeScript client always offers its latest revision; the other revisions are
	// covered by the Go clients and the HTTP rule tables.
	cases := []struct{ name, kind, target, negotiated string }{
		{"streamable-http", "http", "http://" + addr + "/mcp", "2025-11-25"},
		{"legacy-sse", "sse", "http://" + addr + "/sse", ""},
		{"stdio", "stdio", bin, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runScript[result](t, nodeBin, "client.mjs", sdk, c.kind, c.target)
			if r.Server != "mcprouter" || r.Echo != "from typescript" || r.Tools < 10 || r.Negotiated != c.negotiated {
				t.Fatalf("unexpected: %+v", r)
			}
			t.Logf("%+v", r)
		})
	}
}
