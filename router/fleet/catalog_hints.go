package fleet

import (
	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/ast"
)

// toolRepeatable reports whether a tool's annotations (MCP 2025-03-26 and later) say
// that calling it twice with the same arguments does no more than calling it once: it
// only reads (readOnlyHint) or a repeated call has no further effect (idempotentHint).
// Only then may a call whose answer was lost, and which the backend may have run, be
// sent to another replica. Both hints default to false, as the specification says, so
// a tool without annotations (or a backend of 2024-11-05, which has none) is never
// repeated; a hint that is not a boolean counts as absent.
func toolRepeatable(tool []byte) bool {
	return hint(tool, "readOnlyHint") || hint(tool, "idempotentHint")
}

// hint reads the boolean annotation name of a tool object; false when it is absent or
// not a boolean.
func hint(tool []byte, name string) bool {
	n, err := sonic.Get(tool, "annotations", name)
	return err == nil && n.TypeSafe() == ast.V_TRUE
}
