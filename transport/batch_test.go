package transport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestBatches covers JSON-RPC batches on a 2025-03-26 session (the last revision that has
// them) and on the legacy transport: mixed valid and invalid elements, notifications
// only, empty, too long.
func TestBatches(t *testing.T) {
	type reply struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	rows := []struct {
		name   string
		body   string
		status int
		ids    []string // ids of the replies, sorted ("null" for invalid elements)
		codes  []int    // error codes present, sorted
		err    string   // for non-array answers: substring of the body
	}{
		{name: "requests", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"echo","params":{"a":1}}]`, status: 200, ids: []string{"1", "2"}},
		{name: "mixed valid and invalid", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"foo":1},1,{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":3,"method":"nope"}]`, status: 200,
			ids: []string{"1", "3", "null", "null"}, codes: []int{-32601, -32600, -32600}},
		{name: "notifications only", body: `[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","method":"notifications/x"}]`, status: 202},
		{name: "notifications and responses", body: `[{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"s","result":{}}]`, status: 202},
		{name: "invalid only", body: `[1,2]`, status: 200, ids: []string{"null", "null"}, codes: []int{-32600, -32600}},
		{name: "empty", body: `[]`, status: 400, err: "-32600"},
		{name: "broken array", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}`, status: 400, err: "-32700"},
		{name: "too long", body: "[" + strings.Repeat(`{"jsonrpc":"2.0","method":"n"},`, 5) + `{"jsonrpc":"2.0","method":"n"}]`, status: 400, err: "batch too long: at most 5 elements"},
	}
	check := func(t *testing.T, status int, body string, rw int) {
		r := rows[rw]
		if status != r.status {
			t.Fatalf("status %d, want %d: %s", status, r.status, body)
		}
		if r.err != "" {
			if !strings.Contains(body, r.err) {
				t.Errorf("body %s does not contain %q", body, r.err)
			}
			return
		}
		if r.status == 202 {
			if body != "" {
				t.Errorf("202 with body %q", body)
			}
			return
		}
		var replies []reply
		if err := json.Unmarshal([]byte(body), &replies); err != nil {
			t.Fatalf("batch reply %q is not an array: %v", body, err)
		}
		var ids []string
		var codes []int
		for _, rp := range replies {
			ids = append(ids, string(rp.ID))
			if rp.Error != nil {
				codes = append(codes, rp.Error.Code)
			}
		}
		sort.Strings(ids)
		sort.Ints(codes)
		want := append([]int(nil), r.codes...)
		sort.Ints(want)
		if fmt.Sprint(ids) != fmt.Sprint(r.ids) || fmt.Sprint(codes) != fmt.Sprint(want) {
			t.Errorf("replies ids %v codes %v, want ids %v codes %v: %s", ids, codes, r.ids, want, body)
		}
	}

	t.Run("streamable", func(t *testing.T) {
		ts := newTestServer(t, serverOpts{cfg: HTTPConfig{MaxBatch: 5}})
		sid := ts.initialize("2025-03-26")
		for i, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				resp := ts.do(req{body: r.body, headers: sessionHeaders(sid, "2025-03-26")})
				check(t, resp.StatusCode, bodyOf(resp), i)
			})
		}
	})
	t.Run("legacy", func(t *testing.T) {
		ts := newTestServer(t, serverOpts{cfg: HTTPConfig{MaxBatch: 5}})
		stream, rd, endpoint := ts.openLegacy()
		defer stream.Body.Close()
		for i, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				resp := ts.do(req{path: endpoint, body: r.body})
				body := bodyOf(resp)
				if resp.StatusCode == 202 && r.status != 202 && r.err == "" {
					// Replies travel on the stream.
					ev := readEvents(t, rd, 1)[0]
					if ev.Event != "message" {
						t.Errorf("event type %q, want message", ev.Event)
					}
					check(t, 200, ev.Data, i)
					return
				}
				check(t, resp.StatusCode, body, i)
			})
		}
	})
}

// TestBatchInitialize: on a 2025-03-26 client without a session, a batch may carry the
// initialize request; anything else in it without a session is refused.
func TestBatchInitialize(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	resp := ts.do(req{body: `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}]`})
	if resp.StatusCode != 200 || resp.Header.Get(HeaderSessionID) == "" {
		t.Fatalf("batch initialize: %d session %q: %s", resp.StatusCode, resp.Header.Get(HeaderSessionID), bodyOf(resp))
	}
	resp = ts.do(req{body: `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`})
	if resp.StatusCode != 400 {
		t.Fatalf("batch with initialize and ping without a session: %d, want 400", resp.StatusCode)
	}
}
