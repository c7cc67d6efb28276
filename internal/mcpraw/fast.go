package mcpraw

import "github.com/valyala/fasthttp"

// FastPost makes req a POST to the Streamable HTTP endpoint url with the headers a
// Client's POST carries: Content-Type, Accept, and with session sid its id and
// MCP-Protocol-Version version (DefaultVersion when empty). The body is the caller's
// to set. It is for the benchmarks and loops that send with fasthttp, reusing req.
func FastPost(req *fasthttp.Request, url, sid, version string) {
	req.Reset()
	req.SetRequestURI(url)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid == "" {
		return
	}
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", versionOr(version))
}
