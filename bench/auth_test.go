package bench

// The cost of client authentication on a forwarded call, measured end to end like that
// of metrics (metrics_test.go): a router with authentication and one with auth.mode off
// in this process, in front of the same in-process reference backend, driven alternately
// in short rounds by the same clients. See RESULTS.md ("auth").

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// benchResource is the canonical URI of the authenticating routers: their tokens'
// audience.
const benchResource = "http://127.0.0.1/mcp"

// tokenTransport presents each session's own token: the token of the session named by
// the request's Mcp-Session-Id, or next for a session being opened (initialize and
// notifications/initialized). Set up before the clients start, read-only after.
type tokenTransport struct {
	next      string
	bySession map[string]string // session id -> "Bearer <token>"
}

func (t *tokenTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	h := t.next
	if own, ok := t.bySession[string(req.Header.Peek("Mcp-Session-Id"))]; ok {
		h = own
	}
	req.Header.Set("Authorization", h)
	return fasthttp.DefaultTransport.RoundTrip(hc, req, resp)
}

// startAuthRouter starts a router with the auth section ac (admin off, as the router it
// is compared with), and opens clients sessions on it, session i with token(i).
func startAuthRouter(b *testing.B, backendURL string, ac auth.Config, clients int, token func(i int) string) *routerUnderTest {
	cfg := app.Config{
		Listen:   "127.0.0.1:0",
		Admin:    app.AdminConfig{Listen: app.AdminOff},
		Backends: []app.BackendConfig{{Name: "demo", URL: backendURL}},
		Auth:     ac,
	}
	a := apptest.Start(b, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), benchWait)
	tt := &tokenTransport{bySession: make(map[string]string)}
	r := &routerUnderTest{app: a, client: &fasthttp.HostClient{Addr: a.Addr(), MaxConns: clients * 2,
		ReadTimeout: benchWait, WriteTimeout: benchWait, Transport: tt}}
	for i := 0; i < clients; i++ {
		tt.next = "Bearer " + token(i)
		sid := r.initialize(b)
		tt.bySession[sid] = tt.next
		r.sessions = append(r.sessions, sid)
	}
	return r
}

// BenchmarkAuthOverhead reports the throughput of forwarded tools/call through a router
// that authenticates every request (jwt: access tokens of a real OpenID provider, one
// principal per session; bearer: static tokens, short or as long as the JWTs) against
// the same router with auth.mode off, and the median of the paired round ratios
// (auth/off), as BenchmarkMetricsOverhead does. Run it with a fixed count:
// -benchtime 100000x.
func BenchmarkAuthOverhead(b *testing.B) {
	clients := 2 * runtime.GOMAXPROCS(0)
	backend := startBackend(b)
	op := authtest.Start(b, authtest.Options{})
	off := startRouter(b, backend, app.AdminOff, clients)
	jwts := make([]string, clients)
	for i := range jwts {
		jwts[i] = op.Token(authtest.Claims{Subject: fmt.Sprintf("user-%d", i), Audience: []string{benchResource}, Expiry: time.Now().Add(time.Hour)})
	}
	// Static tokens as short as a generated secret, and as long as the JWTs: the
	// difference is what the longer Authorization header costs on its own.
	short := func(i int) string { return fmt.Sprintf("bench-token-%d", i) }
	long := func(i int) string { return short(i) + strings.Repeat("x", len(jwts[i])-len(short(i))) }
	modes := []struct {
		name  string
		cfg   auth.Config
		token func(i int) string
	}{
		{"jwt", auth.Config{Mode: auth.ModeJWT, Resource: benchResource, Issuer: op.Issuer}, func(i int) string { return jwts[i] }},
		{"bearer", auth.Config{Mode: auth.ModeBearer, Resource: benchResource, BearerTokens: benchBearerTokens(clients, short)}, short},
		{"bearer-jwt-length", auth.Config{Mode: auth.ModeBearer, Resource: benchResource, BearerTokens: benchBearerTokens(clients, long)}, long},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			on := startAuthRouter(b, backend, m.cfg, clients, m.token)
			pairedRounds(b, on, off, m.name)
		})
	}
}

// benchBearerTokens are the static tokens token(0..n-1), one principal each.
func benchBearerTokens(n int, token func(i int) string) []auth.BearerToken {
	out := make([]auth.BearerToken, n)
	for i := range out {
		sum := sha256.Sum256([]byte(token(i)))
		out[i] = auth.BearerToken{Principal: fmt.Sprintf("user-%d", i), SHA256: hex.EncodeToString(sum[:])}
	}
	return out
}
