package router

import (
	"strings"
	"sync"
	"testing"
)

// genFleet offers the capabilities it is told, counts how often they are asked for,
// and moves its generation when told to (GenerationalFleet).
type genFleet struct {
	echoFleet
	mu    sync.Mutex
	caps  string
	gen   uint64
	asked int
}

func (f *genFleet) AppendCapabilities(dst []byte, _ string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	return append(dst, f.caps...)
}

func (f *genFleet) Generation() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen
}

// set changes what the fleet offers, moving its generation when bump is set.
func (f *genFleet) set(caps string, bump bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.caps = caps
	if bump {
		f.gen++
	}
}

func (f *genFleet) builds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}

// TestDiscoverCache: the server/discover result is built once per generation of the
// fleet: the same for every request until the fleet says it changed (a backend added,
// its capabilities read anew), then rebuilt with what changed.
func TestDiscoverCache(t *testing.T) {
	f := &genFleet{caps: `,"tools":{"listChanged":true}`}
	p := newEraPoster(t, f, StatusOf)
	discover := func() string {
		t.Helper()
		p.post(p.wireModern(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+testMeta+`}}}`, "server/discover", ""))
		if p.ctx.Response.StatusCode() != 200 {
			t.Fatalf("discover: %d %s", p.ctx.Response.StatusCode(), p.ctx.Response.Body())
		}
		return string(p.ctx.Response.Body())
	}
	first := discover()
	if !strings.Contains(first, `"tools":{"listChanged":true}`) || !strings.Contains(first, `"supportedVersions":["2026-07-28"`) {
		t.Fatalf("discover: %s", first)
	}
	builds := f.builds()
	for range 3 {
		if got := discover(); got != first {
			t.Fatalf("discover changed without a change: %s", got)
		}
	}
	if f.builds() != builds {
		t.Errorf("built %d times for one generation", f.builds())
	}
	// A change the fleet has not counted yet is not seen; once counted, it is.
	f.set(`,"tools":{"listChanged":true},"prompts":{"listChanged":true}`, false)
	if got := discover(); got != first {
		t.Errorf("rebuilt before the generation moved: %s", got)
	}
	f.set(`,"tools":{"listChanged":true},"prompts":{"listChanged":true}`, true)
	if got := discover(); !strings.Contains(got, `"prompts":{"listChanged":true}`) || f.builds() != builds+1 {
		t.Errorf("after the change (%d builds): %s", f.builds(), got)
	}
}
