package fleet

import (
	"strconv"
	"testing"
)

// TestDeclaredKey: the session key of a capabilities object is appendDeclared's,
// whether it was met lately or not (more kinds than slots, in turns), and it keeps
// nothing of the request's bytes.
func TestDeclaredKey(t *testing.T) {
	var cs capsSessions
	var all [][]byte
	for i := range 20 {
		all = append(all, []byte(`{"sampling":{},"experimental":{"n`+strconv.Itoa(i)+`":{}},"roots":{"listChanged":`+strconv.FormatBool(i%2 == 0)+`}}`))
	}
	all = append(all, []byte(`{}`), []byte(routerCaps), nil)
	for range 3 {
		for _, caps := range all {
			req := append([]byte(nil), caps...)
			got := cs.declaredKey(req)
			clear(req) // the request's bytes go with its answer
			if want := string(appendDeclared(nil, caps)); got != want {
				t.Fatalf("declaredKey(%s) = %s, want %s", caps, got, want)
			}
		}
	}
	if cs.declaredKey([]byte(routerCaps)) != routerDeclared {
		t.Error("the router's own capabilities do not key the shared session")
	}
}
