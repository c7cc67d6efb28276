package transport

import (
	"bytes"
	"net"
	"strings"
)

// HTTPRules holds the HTTP-level checks every MCP revision asks of a server, shared by the
// Streamable HTTP and legacy HTTP+SSE endpoints.
type HTTPRules struct {
	// AllowedHosts lists the Host header names (without port) accepted; "*" accepts any.
	// Default, when the listener is on a loopback address: localhost, 127.0.0.1 and ::1,
	// which defeats DNS rebinding against a local router.
	AllowedHosts []string
	// AllowedOrigins lists the Origin values accepted (scheme://host[:port], or
	// scheme://host to accept any port, or "*"). A request without Origin is accepted; a
	// present Origin outside the list gets 403. Default as for AllowedHosts.
	AllowedOrigins []string
	// Versions lists the MCP-Protocol-Version values accepted; anything else gets 400.
	Versions []string
	// DefaultVersion is assumed when the header is absent (2025-03-26 per the spec).
	DefaultVersion string
}

// loopbackNames are the host names that mean "this machine".
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// DefaultHTTPRules returns the rules for a listener on addr: loopback names only when it
// binds a loopback address, anything otherwise (put a reverse proxy or explicit lists in
// front of a public listener).
func DefaultHTTPRules(addr string, versions []string, defaultVersion string) HTTPRules {
	r := HTTPRules{Versions: versions, DefaultVersion: defaultVersion}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		r.AllowedHosts = append([]string(nil), loopbackNames...)
		for _, n := range loopbackNames {
			if strings.Contains(n, ":") {
				n = "[" + n + "]"
			}
			r.AllowedOrigins = append(r.AllowedOrigins, "http://"+n, "https://"+n)
		}
	} else {
		r.AllowedHosts = []string{"*"}
		r.AllowedOrigins = []string{"*"}
	}
	return r
}

// Allowed applies the Host and Origin checks to a request's header values, for servers
// that answer some requests without HTTPServer (a stateless endpoint in front of it).
func (r *HTTPRules) Allowed(host, origin []byte) bool {
	return r.hostAllowed(host) && r.originAllowed(origin)
}

// hostAllowed checks a Host header value (host[:port]).
func (r *HTTPRules) hostAllowed(hostport []byte) bool {
	if len(r.AllowedHosts) == 0 {
		return true
	}
	host := stripPort(hostport)
	for _, h := range r.AllowedHosts {
		if h == "*" || strings.EqualFold(h, string(host)) {
			return true
		}
	}
	return false
}

// originAllowed checks an Origin header value; absent is fine (non-browser clients).
func (r *HTTPRules) originAllowed(origin []byte) bool {
	if len(origin) == 0 || len(r.AllowedOrigins) == 0 {
		return true
	}
	for _, o := range r.AllowedOrigins {
		if o == "*" || strings.EqualFold(o, string(origin)) {
			return true
		}
		// "scheme://host" accepts that host on any port.
		if len(origin) > len(o)+1 && origin[len(o)] == ':' && strings.EqualFold(o, string(origin[:len(o)])) &&
			allDigits(origin[len(o)+1:]) {
			return true
		}
	}
	return false
}

// versionFor resolves the MCP-Protocol-Version header: the default when absent, the
// header when supported, ok=false otherwise.
func (r *HTTPRules) versionFor(h []byte) (string, bool) {
	if len(h) == 0 {
		return r.DefaultVersion, true
	}
	for _, v := range r.Versions {
		if v == string(h) {
			return v, true
		}
	}
	return "", false
}

// stripPort removes a :port suffix and IPv6 brackets from a Host header value.
func stripPort(hostport []byte) []byte {
	if len(hostport) > 0 && hostport[0] == '[' {
		if i := bytes.IndexByte(hostport, ']'); i > 0 {
			return hostport[1:i]
		}
		return hostport
	}
	if i := bytes.LastIndexByte(hostport, ':'); i >= 0 && bytes.IndexByte(hostport[:i], ':') < 0 {
		return hostport[:i]
	}
	return hostport
}

// acceptMask tells what an Accept header allows.
type acceptMask uint8

const (
	acceptJSON acceptMask = 1 << iota
	acceptSSE
)

// parseAccept reads an Accept header; absent means anything. The value MCP clients
// send with every POST (acceptBoth) is known without parsing it.
func parseAccept(h []byte) acceptMask {
	if string(h) == acceptBoth {
		return acceptJSON | acceptSSE
	}
	return parseAcceptList(h)
}

// acceptBoth is the Accept header of a POST as the Streamable HTTP transport asks
// clients to write it, and as the SDKs and mcpload do.
const acceptBoth = "application/json, text/event-stream"

// parseAcceptList reads an Accept header as a list of media ranges.
func parseAcceptList(h []byte) acceptMask {
	if len(bytes.TrimSpace(h)) == 0 {
		return acceptJSON | acceptSSE
	}
	var m acceptMask
	for len(h) > 0 {
		var part []byte
		if i := bytes.IndexByte(h, ','); i >= 0 {
			part, h = h[:i], h[i+1:]
		} else {
			part, h = h, nil
		}
		if i := bytes.IndexByte(part, ';'); i >= 0 {
			if q := bytes.Index(part[i:], []byte("q=0")); q >= 0 && !bytes.ContainsAny(part[i+q+3:], "123456789") {
				continue // q=0 means "not acceptable"
			}
			part = part[:i]
		}
		part = bytes.TrimSpace(part)
		switch {
		case bytes.EqualFold(part, []byte("application/json")):
			m |= acceptJSON
		case bytes.EqualFold(part, []byte("text/event-stream")):
			m |= acceptSSE
		case bytes.Equal(part, []byte("*/*")):
			m |= acceptJSON | acceptSSE
		case bytes.EqualFold(part, []byte("application/*")):
			m |= acceptJSON
		case bytes.EqualFold(part, []byte("text/*")):
			m |= acceptSSE
		}
	}
	return m
}

// isJSONContentType accepts application/json with any parameters.
func isJSONContentType(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(ct), []byte("application/json"))
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}
