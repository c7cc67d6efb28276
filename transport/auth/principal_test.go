package auth_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/transport/auth"
)

// TestPrincipalKeepsTokenOut: a Principal handed whole to a logger (text or JSON) or to
// json.Marshal names who it is and never carries its token.
func TestPrincipalKeepsTokenOut(t *testing.T) {
	const secret = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0.c2ln"
	p := &auth.Principal{Subject: "alice", Issuer: "https://issuer.example", Token: secret,
		Claims: map[string]any{"sub": "alice"}}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "principal", p)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "principal", p, "nobody", (*auth.Principal)(nil))
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(b)
	out := buf.String()
	if strings.Contains(out, secret) {
		t.Fatalf("the token reached the output:\n%s", out)
	}
	if !strings.Contains(out, `"principal":"https://issuer.example alice"`) || !strings.Contains(out, "nobody=anonymous") {
		t.Errorf("the principal is not named:\n%s", out)
	}
}
