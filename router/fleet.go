package router

import "github.com/mcprouter/mcprouter/transport"

// Fleet is the backend side of the router: everything the router does not answer itself
// goes to it. The router handles the lifecycle (initialize, ping, shutdown, setLevel);
// the fleet owns tools, resources, prompts, completions, and the messages that answer
// or cancel forwarded requests.
type Fleet interface {
	// AppendCapabilities appends the members of the server capabilities object that the
	// fleet provides for a session of the given revision (e.g. `"tools":{"listChanged":true}`),
	// each preceded by a comma.
	AppendCapabilities(dst []byte, version string) []byte
	// Prepare runs in the session's order (on the dispatcher's shard goroutine) for a
	// message the router does not answer itself. It must not block. It either finishes
	// the exchange itself (x.Reply or x.Done) and returns false, or returns true and
	// Run is called on a worker.
	Prepare(s *Session, x *transport.Exchange) (run bool)
	// Run does the blocking part of forwarding and finishes the exchange.
	Run(s *Session, x *transport.Exchange)
	// SetLogLevel passes logging/setLevel on to the session's backends.
	SetLogLevel(s *Session, level string)
	// SessionOpened tells the fleet about a new initialized session (it delivers
	// list_changed and resource updates to sessions).
	SessionOpened(s *Session)
	// SessionSubscriptions lists the session's resource subscriptions as (backend, URI) pairs,
	// for its record.
	SessionSubscriptions(s *Session) [][2]string
	// Resubscribe restores the subscriptions of a session carried on from another
	// instance.
	Resubscribe(s *Session, subs [][2]string)
	// SessionAdopted tells the fleet that a session moved here from another instance
	// (its transport side is set): it sends what the session may have missed.
	SessionAdopted(s *Session)
	// SessionClosed releases what the fleet held for the session.
	SessionClosed(s *Session)
}

// RelayFleet is implemented by fleets that serve requests other router instances send
// to this one: a 2026-07-28 client's retry whose requestState this instance owns, which
// landed on another (router/fleet, mrtr_owner.go). New hands the router over as their
// handler, so that they are served as the router's own stateless requests.
type RelayFleet interface {
	SetRelayHandler(h transport.Handler)
}
