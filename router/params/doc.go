// Package params checks the params of an MCP request or notification against the
// specification's schema of the revision in use, before the router answers or routes it:
// a required member missing or a member of the wrong JSON type (a numeric uri, a cursor
// that is an object, an unknown log level) is the client's mistake, and it must get
// -32602 naming that member, not a routing error such as "resource not found" and not a
// silent acceptance.
//
// What it owns: the rules of every request and notification of every revision the router
// speaks (tables_gen.go, generated from the schemas in testdata/ by internal/gen; run
// `go generate` after adding a revision) and Validate, which walks the raw params with
// the codec's Walker, builds nothing and allocates nothing unless it returns an error.
// Which methods the router answers, and with which revision, is not its business: a
// method or revision it does not know is valid here, and the dispatcher decides.
//
// Who calls it: the router, on the dispatcher goroutine that runs the request (the same
// one that runs Prepare), once codec.Scan has accepted the message and the session's
// revision is known. The tables are read-only, so Validate is safe for concurrent use
// from any number of goroutines.
//
// What it checks, from the schema: the JSON kinds of each member (string, integer, number,
// boolean, null, object, array), the allowed strings (const, enum), the required members,
// the members of nested objects and the elements of arrays, alternatives (anyOf) told
// apart by kind and, for objects, by a constant member such as "type". Unknown members
// are allowed, as the schemas allow them. Formats, ranges and patterns are not checked.
// An integer is a number written without a fraction or an exponent.
package params

//go:generate go run ./internal/gen -dir .
