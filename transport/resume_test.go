package transport

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/transport/sse"
)

// progressOf returns the "progress" number of a test notification, or -1.
func progressOf(data string) int {
	i := strings.Index(data, `"progress":`)
	if i < 0 {
		return -1
	}
	rest := data[i+len(`"progress":`):]
	j := strings.IndexAny(rest, ",}")
	n, err := strconv.Atoi(rest[:j])
	if err != nil {
		return -1
	}
	return n
}

// checkSequence checks that evs (priming events excluded) carry ids stream-from..,
// contiguous, and, when progress is true, notifications numbered from first.
func checkSequence(t *testing.T, evs []event, stream uint32, from uint64) {
	t.Helper()
	seq := from
	for _, e := range evs {
		if e.Data == "" {
			continue // priming
		}
		if want := fmt.Sprintf("%d-%d", stream, seq); e.ID != want {
			t.Fatalf("event id %q, want %q (lost or duplicated): %+v", e.ID, want, evs)
		}
		seq++
	}
}

// TestResumePostStream: a POST reply stream is dropped twice mid-way; each GET with
// Last-Event-ID resumes exactly after the last event received, live and from the ring,
// and never carries events of the session's other streams.
func TestResumePostStream(t *testing.T) {
	for _, v := range []string{"2025-03-26", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			ts := newTestServer(t, serverOpts{})
			sid := ts.initialize(v)
			h := sessionHeaders(sid, v)
			// Messages on the standalone stream, which a resumption of stream 1 must not replay.
			if resp := ts.do(req{body: `{"jsonrpc":"2.0","id":"b","method":"broadcast","params":{"count":3}}`, headers: h}); resp.StatusCode != 200 {
				t.Fatalf("broadcast: %d", resp.StatusCode)
			}

			post := ts.do(req{body: `{"jsonrpc":"2.0","id":5,"method":"progress","params":{"count":8,"before":2,"gate":true}}`, headers: h})
			if post.StatusCode != 200 || !strings.HasPrefix(post.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("POST progress: %d %s", post.StatusCode, post.Header.Get("Content-Type"))
			}
			rd := sse.NewReader(post.Body, 0)
			primed := v >= "2025-11-25"
			n := 2
			if primed {
				n = 3
			}
			first := readEvents(t, rd, n)
			if primed && (first[0].ID != "1-0" || first[0].Data != "") {
				t.Fatalf("priming event %+v, want id 1-0 and empty data", first[0])
			}
			checkSequence(t, first, 1, 1)
			last := first[len(first)-1].ID
			post.Body.Close() // the connection drops

			// Resume while the request is still running: the rest arrives live.
			get := ts.do(req{method: "GET", headers: merge(h, HeaderLastEventID, last)})
			if get.StatusCode != 200 {
				t.Fatalf("resume GET: %d %s", get.StatusCode, bodyOf(get))
			}
			close(ts.h.gate)
			rd = sse.NewReader(get.Body, 0)
			second := readEvents(t, rd, 1)
			checkSequence(t, second, 1, 3)
			get.Body.Close() // dropped again, after one event

			// Resume again: the rest comes from the ring, then the reply, then the end.
			get = ts.do(req{method: "GET", headers: merge(h, HeaderLastEventID, second[0].ID)})
			if get.StatusCode != 200 {
				t.Fatalf("second resume GET: %d %s", get.StatusCode, bodyOf(get))
			}
			rest := readEvents(t, sse.NewReader(get.Body, 0), -1)
			get.Body.Close()
			checkSequence(t, rest, 1, 4)
			var got []int
			for _, e := range append(append(first, second...), rest...) {
				if e.Data == "" {
					continue
				}
				if strings.Contains(e.Data, `"result"`) {
					got = append(got, -1)
					continue
				}
				got = append(got, progressOf(e.Data))
			}
			if want := "[0 1 2 3 4 5 6 7 -1]"; fmt.Sprint(got) != want {
				t.Errorf("delivered %v, want %s (nothing lost, nothing duplicated, reply last)", got, want)
			}

			// The standalone stream still holds its own three events, untouched.
			get = ts.do(req{method: "GET", headers: merge(h, HeaderLastEventID, "0-0")})
			evs := readEvents(t, sse.NewReader(get.Body, 0), 3)
			get.Body.Close()
			checkSequence(t, evs, 0, 1)

			// Another session cannot name this session's streams.
			other := ts.initialize(v)
			get = ts.do(req{method: "GET", headers: merge(sessionHeaders(other, v), HeaderLastEventID, "1-1")})
			if get.StatusCode != http.StatusNotFound {
				t.Errorf("resume of a stream of another session: %d, want 404", get.StatusCode)
			}
			get.Body.Close()
		})
	}
}

func merge(h map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(h)+len(kv)/2)
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestResumeStandalone: the GET stream drops; what the session sent meanwhile arrives on
// the next GET with Last-Event-ID, exactly once.
func TestResumeStandalone(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	sid := ts.initialize("2025-11-25")
	h := sessionHeaders(sid, "2025-11-25")
	get := ts.do(req{method: "GET", headers: h})
	rd := sse.NewReader(get.Body, 0)
	readEvents(t, rd, 1) // priming 0-0
	ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"broadcast","params":{"count":2}}`, headers: h})
	evs := readEvents(t, rd, 2)
	checkSequence(t, evs, 0, 1)
	get.Body.Close()

	ts.do(req{body: `{"jsonrpc":"2.0","id":2,"method":"broadcast","params":{"count":2}}`, headers: h})
	get = ts.do(req{method: "GET", headers: merge(h, HeaderLastEventID, evs[1].ID)})
	defer get.Body.Close()
	if get.StatusCode != 200 {
		t.Fatalf("resume: %d", get.StatusCode)
	}
	rd = sse.NewReader(get.Body, 0)
	ts.do(req{body: `{"jsonrpc":"2.0","id":3,"method":"broadcast","params":{"count":1}}`, headers: h})
	// A resumed stream is not primed again: the next events are 0-3, 0-4 (sent while
	// disconnected, with progress 0 and 1) and 0-5 (live).
	more := readEvents(t, rd, 3)
	checkSequence(t, more, 0, 3)
	if got := []int{progressOf(more[0].Data), progressOf(more[1].Data), progressOf(more[2].Data)}; fmt.Sprint(got) != "[0 1 0]" {
		t.Errorf("progress %v, want [0 1 0]", got)
	}
	if n := ts.HTTP.Stats.Resumes.Load(); n != 1 {
		t.Errorf("Resumes = %d, want 1", n)
	}
}

// TestSlowConsumer: a client that stops reading its GET stream is cut off once its
// queue passes QueueBytes, the counter says so, and a resumption from the last event it
// did read delivers the rest: nothing lost.
func TestSlowConsumer(t *testing.T) {
	const total, size = 3000, 1024
	ts := newTestServer(t, serverOpts{cfg: HTTPConfig{Stream: sse.StreamConfig{RingBytes: 16 << 20, RingEvents: 2 * total, QueueBytes: 16 << 10}}})
	sid := ts.initialize("2025-06-18")
	h := sessionHeaders(sid, "2025-06-18")
	get := ts.do(req{method: "GET", headers: h})
	if get.StatusCode != 200 {
		t.Fatalf("GET: %d", get.StatusCode)
	}
	// The client reads nothing while about 3 MB is sent, far past every buffer on the way.
	for sent := 0; sent < total; sent += 100 {
		resp := ts.do(req{body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"broadcast","params":{"count":100,"size":%d}}`, sent, size), headers: h})
		if resp.StatusCode != 200 {
			t.Fatalf("broadcast: %d", resp.StatusCode)
		}
	}
	waitFor(t, "the slow consumer to be cut off", func() bool { return ts.HTTP.Stats.SlowConsumers.Load() >= 1 })

	// What did reach the client, up to the cut, is a clean prefix.
	rd := sse.NewReader(get.Body, 0)
	var got []event
	for {
		ev, err := rd.Next()
		if err != nil {
			break // the cut: the connection ends, possibly mid-event
		}
		got = append(got, event{ID: string(ev.ID), Data: string(ev.Data)})
	}
	get.Body.Close()
	checkSequence(t, got, 0, 1)
	if len(got) >= total {
		t.Fatalf("the cut-off client got all %d events: it was not cut", len(got))
	}
	t.Logf("cut after %d events; slow consumers %d", len(got), ts.HTTP.Stats.SlowConsumers.Load())
	last := "0-0"
	if len(got) > 0 {
		last = got[len(got)-1].ID
	}
	resume := ts.do(req{method: "GET", headers: merge(h, HeaderLastEventID, last)})
	if resume.StatusCode != 200 {
		t.Fatalf("resume: %d %s", resume.StatusCode, bodyOf(resume))
	}
	rest := readEvents(t, sse.NewReader(resume.Body, 0), total-len(got))
	t.Logf("resumed: %d events; slow consumers %d", len(rest), ts.HTTP.Stats.SlowConsumers.Load())
	resume.Body.Close()
	checkSequence(t, rest, 0, uint64(len(got)+1))
	if ts.Reg.Len() != 1 {
		t.Errorf("the cut-off session was ended: %d sessions", ts.Reg.Len())
	}
}
