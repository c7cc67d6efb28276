package router

import (
	"strconv"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
)

// TestMetaMemosConcurrent: requests of more kinds of client than there are slots, read
// at once on several goroutines, each get their own _meta's reading, whichever copy
// they find (run it with -race: the copies are shared).
func TestMetaMemosConcurrent(t *testing.T) {
	mm := newMetaMemos()
	const kinds, workers, rounds = 3 * metaMemoSlots, 4, 50
	msgs := make([]codec.Message, kinds)
	for i := range msgs {
		req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c` + strconv.Itoa(i) + `","version":"1"}}}}`
		if err := codec.Scan([]byte(req), &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				i := (w*7 + r*5) % kinds
				var meta modern.Meta
				if mm.read(&msgs[i], &meta) == nil {
					t.Errorf("%s not kept", msgs[i].Meta)
					return
				}
				if want := `{"name":"c` + strconv.Itoa(i) + `","version":"1"}`; string(meta.ClientInfo) != want {
					t.Errorf("read clientInfo %s, want %s", meta.ClientInfo, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
