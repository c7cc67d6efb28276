package modern

import (
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// TestMappingsCoverMethods: every request of the revision and every request it removed
// has a row, every row says why when it is not a plain pass, and the lookups find each
// row from its side.
func TestMappingsCoverMethods(t *testing.T) {
	for _, m := range methods {
		if ToLegacy([]byte(m.Name), ClientToServer, Request) == nil {
			t.Errorf("%s has no translation row", m.Name)
		}
	}
	for _, name := range []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "tasks/result", "tasks/list"} {
		r := ToModern([]byte(name), ClientToServer, Request)
		if r == nil || r.How == Same {
			t.Errorf("removed %s: row %+v", name, r)
		}
	}
	for _, name := range []string{"sampling/createMessage", "elicitation/create", "roots/list"} {
		r := ToModern([]byte(name), ServerToClient, Request)
		if r == nil || r.How != Reshaped {
			t.Errorf("server request %s: row %+v", name, r)
		}
	}
	for i, r := range Mappings {
		if r.How != Same && r.Rationale == "" {
			t.Errorf("row %d (%s/%s) is %d without a rationale", i, r.Legacy, r.Modern, r.How)
		}
		if r.Legacy == "" && r.Modern == "" {
			t.Errorf("row %d names no method", i)
		}
		if r.How == Same && r.Legacy != r.Modern {
			t.Errorf("row %d: Same but %s != %s", i, r.Legacy, r.Modern)
		}
		if r.Legacy != "" && ToModern([]byte(r.Legacy), r.Dir, r.Kind) != &Mappings[i] {
			t.Errorf("row %d (%s) is shadowed by an earlier one", i, r.Legacy)
		}
	}
}

func TestErrorCodes(t *testing.T) {
	if c, re := ErrorToModern(codec.CodeResourceNotFound); c != codec.CodeInvalidParams || re {
		t.Error("-32002 must become -32602")
	}
	if _, re := ErrorToModern(codec.CodeURLElicitationRequired); !re {
		t.Error("-32042 must be reshaped")
	}
	for _, c := range []int{codec.CodeInvalidParams, codec.CodeMethodNotFound, codec.CodeOverloaded, codec.CodeBackendTimeout} {
		if got, _ := ErrorToModern(c); got != c || ErrorToLegacy(c) != c {
			t.Errorf("%d must pass both ways", c)
		}
	}
	// The table and the functions agree.
	for _, m := range CodeMappings {
		if m.Modern != 0 && m.Legacy != codec.CodeInvalidParams && m.Legacy != codec.CodeInternalError {
			if got, _ := ErrorToModern(m.Legacy); got != m.Modern {
				t.Errorf("ErrorToModern(%d) = %d, table says %d", m.Legacy, got, m.Modern)
			}
		}
		if m.Modern != 0 && m.Modern != codec.CodeInvalidParams {
			if got := ErrorToLegacy(m.Modern); got != m.Legacy {
				t.Errorf("ErrorToLegacy(%d) = %d, table says %d", m.Modern, got, m.Legacy)
			}
		}
	}
	for _, c := range []int{codec.CodeHeaderMismatch, codec.CodeMissingCapability, codec.CodeUnsupportedVersion} {
		if ErrorToLegacy(c) == c {
			t.Errorf("%d is a 2026 code and must not reach a 2025 client", c)
		}
	}
}

// TestMethodNotFound: a method the table cannot map or the router does not route gets
// its reason in the -32601 message; any other, the plain message.
func TestMethodNotFound(t *testing.T) {
	for method, want := range map[string][]string{
		"tasks/list":   {"Method not found: tasks/list: ", "removed in 2026-07-28", TasksNotRouted},
		"tasks/result": {"removed in 2026-07-28", TasksNotRouted},
		"tasks/update": {"2025 tasks take no input from the client"},
		"tasks/get":    {TasksNotRouted},
		"tasks/cancel": {TasksNotRouted},
		"nope/x":       {"Method not found: nope/x"},
	} {
		got := MethodNotFound([]byte(method))
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q, want it to say %q", method, got, w)
			}
		}
	}
	if got := MethodNotFound([]byte("nope/x")); got != "Method not found: nope/x" {
		t.Errorf("unknown method: %q", got)
	}
}

// TestDroppedForModern: DroppedForModern is true of exactly the server-to-client
// notifications the table drops toward a 2026-07-28 client.
func TestDroppedForModern(t *testing.T) {
	for _, r := range Mappings {
		if r.Dir != ServerToClient || r.Kind != Notification || r.Legacy == "" {
			continue
		}
		if want := r.How == Unmappable; DroppedForModern([]byte(r.Legacy)) != want {
			t.Errorf("%s: DroppedForModern %v, the table says %v", r.Legacy, !want, want)
		}
	}
}
