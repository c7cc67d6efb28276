package router

// Protocol revisions the router speaks with clients, oldest first.
const (
	V20241105 = "2024-11-05"
	V20250326 = "2025-03-26"
	V20250618 = "2025-06-18"
	V20251125 = "2025-11-25"
	V20260728 = "2026-07-28"
)

// Versions lists the revisions a client can negotiate at initialize, oldest first.
// 2026-07-28 is stateless (no initialize) and is answered by server/discover once the
// router speaks it; until then initialize offers the newest session revision.
var Versions = []string{V20241105, V20250326, V20250618, V20251125}

// HeaderVersions lists the values accepted in the MCP-Protocol-Version header. It
// includes 2026-07-28 so that a stateless client's server/discover reaches the router
// and gets -32601 (its signal to fall back to initialize) rather than a bare 400; its
// other sessionless requests still get 400 for the missing Mcp-Session-Id.
var HeaderVersions = []string{V20241105, V20250326, V20250618, V20251125, V20260728}

// Latest is the newest revision initialize offers.
const Latest = V20251125

// Negotiate picks the revision to answer an initialize with: the requested one when
// supported, otherwise the latest (the client then decides whether it can go on).
func Negotiate(requested string) string {
	for _, v := range Versions {
		if v == requested {
			return v
		}
	}
	return Latest
}

// validVersionSyntax reports whether v looks like a revision (YYYY-MM-DD).
func validVersionSyntax(v string) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i, c := range []byte(v) {
		if i == 4 || i == 7 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
