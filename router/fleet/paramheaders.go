package fleet

import (
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// checkParamHeaders checks a 2026-07-28 client's Mcp-Param-* headers on the stateless
// tools/call x against decls, the declarations (x-mcp-header in its inputSchema) of the
// tool it calls (modern.CheckParamHeaders): the router processes the body, so the
// revision asks it to, and a 2025 backend would not. The declarations come with the
// tool's route, read when its list came (catalog_build.go): a call of a tool without
// any (most) does not get here. A rejection is answered by the caller.
func checkParamHeaders(decls []modern.ParamHeader, x *transport.Exchange) modern.Reject {
	return modern.CheckParamHeaders(decls, codec.Member(x.Msg.Params, "arguments"), x.Headers.Params)
}
