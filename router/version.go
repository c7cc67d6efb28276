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
// 2026-07-28 is stateless (no initialize): its requests are served one by one
// (stateless.go), and initialize offers the newest session revision.
var Versions = []string{V20241105, V20250326, V20250618, V20251125}

// HeaderVersions lists the values accepted in the MCP-Protocol-Version header of a
// session's requests. A stateless request's header is judged by the router instead
// (an unknown stateless version gets -32022).
var HeaderVersions = []string{V20241105, V20250326, V20250618, V20251125, V20260728}

// StatelessVersions lists the revisions served without a session (per request, their
// version in each request's _meta).
var StatelessVersions = []string{V20260728}

// DiscoverVersions lists every revision the router speaks, preferred first: what
// server/discover offers and what -32022 names. It speaks the session revisions
// whatever its backends speak, as it translates between the generations.
var DiscoverVersions = []string{V20260728, V20251125, V20250618, V20250326, V20241105}

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
