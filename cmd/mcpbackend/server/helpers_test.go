package server

import (
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/golden"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// waitLimit bounds every wait in the tests: generous, because the machine is shared, and
// never an assertion about speed.
const waitLimit = 20 * time.Second

// recorder is a Responder that records what the server does with one message.
type recorder struct {
	mu        sync.Mutex
	replies   [][]byte
	sends     [][]byte
	dones     int
	afterEnd  int // Send, Reply or Done after the exchange ended: must stay 0
	ended     chan struct{}
	endedOnce sync.Once
}

func newRecorder() *recorder { return &recorder{ended: make(chan struct{})} }

func (r *recorder) end() { r.endedOnce.Do(func() { close(r.ended) }) }

func (r *recorder) isEnded() bool {
	select {
	case <-r.ended:
		return true
	default:
		return false
	}
}

func (r *recorder) Reply(msg []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isEnded() {
		r.afterEnd++
		return
	}
	r.replies = append(r.replies, append([]byte(nil), msg...))
	r.end()
}

func (r *recorder) Done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isEnded() {
		r.afterEnd++
		return
	}
	r.dones++
	r.end()
}

func (r *recorder) Send(msg []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isEnded() {
		r.afterEnd++
		return nil
	}
	r.sends = append(r.sends, append([]byte(nil), msg...))
	return nil
}

// wait blocks until the exchange ended (bounded).
func (r *recorder) wait(t testing.TB) {
	t.Helper()
	select {
	case <-r.ended:
	case <-time.After(waitLimit):
		t.Fatalf("no Reply or Done within %v", waitLimit)
	}
}

// reply returns the single reply, failing if the exchange ended otherwise.
func (r *recorder) reply(t testing.TB) []byte {
	t.Helper()
	r.wait(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.replies) != 1 || r.dones != 0 || r.afterEnd != 0 {
		t.Fatalf("want exactly one reply; got %d replies, %d dones, %d late calls", len(r.replies), r.dones, r.afterEnd)
	}
	return r.replies[0]
}

func (r *recorder) sent() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.sends...)
}

// sender is a fake transport session: it records server-initiated messages.
type sender struct {
	mu     sync.Mutex
	msgs   [][]byte
	closed int
	notify chan struct{}
}

func newSender() *sender { return &sender{notify: make(chan struct{}, 1024)} }

func (s *sender) Send(msg []byte) error {
	s.mu.Lock()
	s.msgs = append(s.msgs, append([]byte(nil), msg...))
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return nil
}

func (s *sender) Close() {
	s.mu.Lock()
	s.closed++
	s.mu.Unlock()
}

func (s *sender) messages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.msgs...)
}

// newTestServer starts a server with the timer off (deterministic resource versions).
func newTestServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Tick == 0 {
		cfg.Tick = -1
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Cleanup(t, waitLimit, s.Close)
	return s
}

// scan scans a message for Serve, failing the test on invalid input.
func scan(t testing.TB, msg string) *codec.Message {
	t.Helper()
	m := new(codec.Message)
	if err := codec.Scan([]byte(msg), m); err != nil {
		t.Fatalf("scan %s: %v", msg, err)
	}
	return m
}

// openSession initializes a session of the given revision directly through Initialize.
func openSession(t testing.TB, s *Server, version, capabilities string) (*Session, *sender) {
	t.Helper()
	out := newSender()
	var sess *Session
	r := newRecorder()
	s.serveUninitialized(scan(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+
		`","capabilities":`+capabilities+`,"clientInfo":{"name":"test","version":"1"}}}`), r,
		func(v string, ns *Session) (Sender, error) { sess = ns; return out, nil })
	r.reply(t)
	if sess == nil {
		t.Fatal("initialize did not bind a session")
	}
	return sess, out
}

// do serves one message and returns its recorder.
func do(t testing.TB, s *Server, sess *Session, msg string) *recorder {
	t.Helper()
	r := newRecorder()
	s.Serve(scan(t, msg), sess, r)
	return r
}

// checkGolden compares got with testdata/golden/name, or rewrites it with -update. JSON is
// compared after indentation so the files are readable.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("%s: reply is not JSON: %v\n%s", name, err, got)
	}
	pretty, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", name), append(pretty, '\n'))
}
