package compare

import (
	"fmt"
	"regexp"
	"strconv"
)

// Server names (processes started by the harness).
const (
	srvStub           = "stub"
	srvBackend        = "mcpbackend"
	srvRouter         = "mcprouter"
	srvRouterPipe     = "mcprouter-pipelined"
	srvGoSDKStateless = "gosdk-stateless"
	srvGoSDKSession   = "gosdk-session"
	srvMCPGoSession   = "mcpgo-session"
	srvMCPGoStateless = "mcpgo-stateless"
	srvRouterStdio    = "mcprouter-stdio"
	srvHAProxy        = "haproxy"
	srvNginx          = "nginx"
	srvFastRelay      = "fastrelay"
	srvSupergateway   = "supergateway"
	srvMCPProxy       = "mcp-proxy"
)

// Binaries built by the harness.
const (
	binLoad    = "mcpload"
	binBackend = "mcpbackend"
	binRouter  = "mcprouter"
	binPeers   = "peers"
	binRelay   = "fastrelay"
)

// routerBackendName is the backend's name in the router's configuration, so the echo
// tool is reached through the router as routerBackendName + "__echo".
const routerBackendName = "backend"

var (
	// mcpbackend and mcprouter log `msg="... listening" addr=HOST:PORT` once they accept.
	reBackendAddr = regexp.MustCompile(`mcpbackend listening.* addr=(\S+)`)
	reRouterAddr  = regexp.MustCompile(`mcprouter listening.* addr=(\S+)`)
	reAdminAddr   = regexp.MustCompile(`admin listening.* addr=(\S+)`)
	// The peers print "IMPL MODE serving on http://HOST:PORT/mcp", mcpload stub
	// "serving http://HOST:PORT/mcp".
	reServingURL = regexp.MustCompile(`serving (?:on )?(http://\S+)`)
)

// serverSpec says how to start one server process and find its endpoint.
type serverSpec struct {
	name   string
	binary string
	// args are the arguments after the binary; the router's are built from its backend.
	args []string
	// needs are servers that must be running first (the router needs its backend).
	needs []string
	// pattern's first submatch is the MCP endpoint (a URL, or an address when addrOnly).
	pattern  *regexp.Regexp
	addrOnly bool
	// admin: the server also announces an admin listener whose /readyz must say yes
	// before it takes load (the router: it is ready once its backend is connected).
	admin bool
	// external: a program the harness does not build (see external.go). It listens on
	// a port the harness picks and is ready once that port accepts connections; when it
	// cannot be found or installed, the targets that need it are skipped.
	external bool
}

var servers = []serverSpec{
	{name: srvStub, binary: binLoad, args: []string{"stub", "--listen", "127.0.0.1:0"}, pattern: reServingURL},
	{name: srvBackend, binary: binBackend, args: []string{"--listen", "127.0.0.1:0"}, pattern: reBackendAddr, addrOnly: true},
	{name: srvRouter, binary: binRouter, needs: []string{srvBackend}, pattern: reRouterAddr, addrOnly: true, admin: true},
	{name: srvRouterPipe, binary: binRouter, needs: []string{srvBackend}, pattern: reRouterAddr, addrOnly: true, admin: true},
	{name: srvGoSDKStateless, binary: binPeers, args: peerArgs("gosdk", "stateless"), pattern: reServingURL},
	{name: srvGoSDKSession, binary: binPeers, args: peerArgs("gosdk", "session"), pattern: reServingURL},
	{name: srvMCPGoSession, binary: binPeers, args: peerArgs("mcpgo", "session"), pattern: reServingURL},
	{name: srvMCPGoStateless, binary: binPeers, args: peerArgs("mcpgo", "stateless"), pattern: reServingURL},
	{name: srvRouterStdio, binary: binRouter, pattern: reRouterAddr, addrOnly: true, admin: true},
	{name: srvHAProxy, needs: []string{srvBackend}, external: true},
	{name: srvNginx, needs: []string{srvBackend}, external: true},
	// fastrelay's --upstream is the backend's URL, added when it starts (startServers).
	{name: srvFastRelay, binary: binRelay, args: []string{"--listen", "127.0.0.1:0"}, needs: []string{srvBackend}, pattern: reServingURL},
	{name: srvSupergateway, external: true},
	{name: srvMCPProxy, external: true},
}

func peerArgs(impl, mode string) []string {
	return []string{"-impl", impl, "-mode", mode, "-addr", "127.0.0.1:0"}
}

func serverByName(name string) *serverSpec {
	for i := range servers {
		if servers[i].name == name {
			return &servers[i]
		}
	}
	panic("compare: unknown server " + name)
}

// benchPipeline is the backends[].pipeline of the pipelined router: two connections, so
// that calls arriving together share a write (see transport/upstream's pipeline).
const benchPipeline = 2

// routerConfig is a router's configuration file: ephemeral ports, one backend, the admin
// listener on (its /readyz tells when the backend is connected; /debug/pprof for
// profiles), the backend's connections pipelined for srvRouterPipe. backend is
// mcpbackend's URL, or for srvRouterStdio the mcpbackend program run as its stdio child.
func routerConfig(server, backend string, pprof bool) string {
	target := "url: " + backend
	switch server {
	case srvRouterPipe:
		target += fmt.Sprintf("\n    pipeline: %d", benchPipeline)
	case srvRouterStdio:
		target = fmt.Sprintf("command: [%s, stdio]", strconv.Quote(backend))
	}
	return fmt.Sprintf(`# written by bench/compare
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  pprof: %s
backends:
  - name: %s
    %s
`, strconv.FormatBool(pprof), routerBackendName, target)
}

// isRouter reports whether a server is one of the router configurations.
func isRouter(server string) bool {
	return server == srvRouter || server == srvRouterPipe || server == srvRouterStdio
}

// Implementation families, for the goals that compare against "the fastest peer".
const (
	familyOurs  = "ours"
	familyGoSDK = "gosdk"
	familyMCPGo = "mcpgo"
	familyStub  = "stub"
	// familyFloor: HTTP reverse proxies that know nothing of MCP, the floor of a hop.
	familyFloor = "floor"
	// familyBridge: the stdio bridges (a stdio server put on Streamable HTTP).
	familyBridge = "bridge"
)

// targetSpec is one thing measured: an endpoint, the tool called there and the server
// processes whose CPU the operations cost.
type targetSpec struct {
	name  string
	label string // what it is, for the tables
	// servers: the first one is the endpoint; all of them are charged the CPU.
	servers []string
	tool    string
	family  string
}

var targets = []targetSpec{
	{name: TargetStub, label: "mcpload stub (trivial fixed reply)", servers: []string{srvStub}, tool: "echo", family: familyStub},
	{name: TargetDirect, label: "mcpbackend alone", servers: []string{srvBackend}, tool: "echo", family: familyOurs},
	{name: TargetRouter, label: "mcprouter -> mcpbackend", servers: []string{srvRouter, srvBackend}, tool: routerBackendName + "__echo", family: familyOurs},
	{name: TargetRouterPipelined, label: "mcprouter -> mcpbackend, pipelined (pipeline: 2)", servers: []string{srvRouterPipe, srvBackend}, tool: routerBackendName + "__echo", family: familyOurs},
	{name: TargetGoSDKStateless, label: "official Go SDK, stateless, JSON replies", servers: []string{srvGoSDKStateless}, tool: "echo", family: familyGoSDK},
	{name: TargetGoSDKSession, label: "official Go SDK, sessions, SSE replies", servers: []string{srvGoSDKSession}, tool: "echo", family: familyGoSDK},
	{name: TargetMCPGoSession, label: "mcp-go, sessions, JSON replies", servers: []string{srvMCPGoSession}, tool: "echo", family: familyMCPGo},
	{name: TargetMCPGoStateless, label: "mcp-go, stateless, JSON replies", servers: []string{srvMCPGoStateless}, tool: "echo", family: familyMCPGo},
	{name: TargetHAProxy, label: "haproxy -> mcpbackend (keep-alive reverse proxy)", servers: []string{srvHAProxy, srvBackend}, tool: "echo", family: familyFloor},
	{name: TargetNginx, label: "nginx -> mcpbackend (keep-alive reverse proxy)", servers: []string{srvNginx, srvBackend}, tool: "echo", family: familyFloor},
	{name: TargetFastRelay, label: "fastrelay -> mcpbackend (fasthttp server + HostClient.Do, the floor of a hop on fasthttp)", servers: []string{srvFastRelay, srvBackend}, tool: "echo", family: familyFloor},
	{name: TargetRouterStdio, label: "mcprouter -> mcpbackend stdio (CPU with its child)", servers: []string{srvRouterStdio}, tool: routerBackendName + "__echo", family: familyOurs},
	{name: TargetSupergateway, label: "supergateway --stateful -> mcpbackend stdio (CPU with its children)", servers: []string{srvSupergateway}, tool: "echo", family: familyBridge},
	{name: TargetMCPProxy, label: "mcp-proxy -> mcpbackend stdio (CPU with its children)", servers: []string{srvMCPProxy}, tool: "echo", family: familyBridge},
}

func targetByName(name string) *targetSpec {
	for i := range targets {
		if targets[i].name == name {
			return &targets[i]
		}
	}
	return nil
}
