package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

func TestParseFaults(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Faults
		bad  bool
	}{
		{"", 0, false},
		{"slow-bytes", FaultSlowBytes, false},
		{"oversize, never-answer", FaultOversize | FaultNeverAnswer, false},
		{"all", FaultsAll, false},
		{"slow", 0, true},
	} {
		got, err := ParseFaults(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseFaults(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
		if err == nil {
			if back, _ := ParseFaults(got.String()); back != got {
				t.Errorf("%q: String %q does not parse back", tc.in, got.String())
			}
		}
	}
}

// TestFaultToolsOnlyWhenAsked: the default catalog has no fault tool; each fault adds
// exactly its own.
func TestFaultToolsOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		faults Faults
		want   []string
	}{
		{0, nil},
		{FaultOversize, []string{"fault_oversize"}},
		{FaultsAll, []string{"fault_slow_bytes", "fault_oversize", "fault_flood", "fault_invalid_json", "fault_unknown_id", "fault_double_answer", "fault_never_answer"}},
	} {
		s := newTestServer(t, Config{Faults: tc.faults})
		var got []string
		for name := range s.cat.toolByName {
			if strings.HasPrefix(name, "fault_") {
				got = append(got, name)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("faults %v: fault tools %v, want %v", tc.faults, got, tc.want)
		}
		for _, w := range tc.want {
			if s.cat.toolByName[w] == nil {
				t.Errorf("faults %v: no tool %s", tc.faults, w)
			}
		}
	}
}

func faultCall(id int, tool, args string) string {
	return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

func itoa(n int) string { return string(appendInt(nil, int64(n))) }

func TestFaultTools(t *testing.T) {
	s := newTestServer(t, Config{Faults: FaultsAll, MaxPayload: 1 << 20, MaxSleep: 2 * time.Second})
	sess, out := openSession(t, s, "2025-06-18", `{}`)

	t.Run("invalid-json", func(t *testing.T) {
		got := do(t, s, sess, faultCall(7, "fault_invalid_json", `{}`)).reply(t)
		if json.Valid(got) || !bytes.HasPrefix(got, []byte(`{"jsonrpc":"2.0","id":7,`)) {
			t.Errorf("truncated: %s", got)
		}
		got = do(t, s, sess, faultCall(8, "fault_invalid_json", `{"shape":"garbage"}`)).reply(t)
		if json.Valid(got) || bytes.Contains(got, []byte(`"id"`)) {
			t.Errorf("garbage: %s", got)
		}
	})
	t.Run("oversize", func(t *testing.T) {
		got := do(t, s, sess, faultCall(9, "fault_oversize", `{"bytes":100000}`)).reply(t)
		if len(got) < 100000 || !json.Valid(got) {
			t.Errorf("got %d bytes (valid %v)", len(got), json.Valid(got))
		}
		if msg := do(t, s, sess, faultCall(10, "fault_oversize", `{"bytes":2000000}`)).reply(t); !bytes.Contains(msg, []byte(`"isError":true`)) {
			t.Errorf("beyond MaxPayload: %s", msg)
		}
	})
	t.Run("unknown-id", func(t *testing.T) {
		r := do(t, s, sess, faultCall(11, "fault_unknown_id", `{}`))
		got := r.reply(t)
		sent := r.sent()
		var m codec.Message
		if len(sent) != 1 || codec.Scan(sent[0], &m) != nil || m.Kind != codec.KindResult || string(m.ID) == "11" {
			t.Fatalf("want one stray response before the answer; sent %q", sent)
		}
		if codec.Scan(got, &m) != nil || string(m.ID) != "11" {
			t.Errorf("answer: %s", got)
		}
		alone := do(t, s, sess, faultCall(12, "fault_unknown_id", `{"alone":true}`)).reply(t)
		if codec.Scan(alone, &m) != nil || string(m.ID) == "12" {
			t.Errorf("alone: %s", alone)
		}
	})
	t.Run("double-answer", func(t *testing.T) {
		r := do(t, s, sess, faultCall(13, "fault_double_answer", `{}`))
		got := r.reply(t)
		if sent := r.sent(); len(sent) != 1 || !bytes.Equal(sent[0], got) {
			t.Errorf("want the answer sent, then replied; sent %q, replied %s", sent, got)
		}
		batch := do(t, s, sess, faultCall(14, "fault_double_answer", `{"batch":true}`)).reply(t)
		var arr []json.RawMessage
		if json.Unmarshal(batch, &arr) != nil || len(arr) != 2 {
			t.Errorf("batch: %s", batch)
		}
	})
	t.Run("flood", func(t *testing.T) {
		r := do(t, s, sess, faultCall(15, "fault_flood", `{"count":500}`))
		r.reply(t)
		if n := len(r.sent()); n != 500 {
			t.Errorf("log flood: %d notifications on the request, want 500", n)
		}
		before := len(out.messages())
		do(t, s, sess, faultCall(16, "fault_flood", `{"count":300,"kind":"listChanged"}`)).reply(t)
		if n := len(out.messages()) - before; n != 300 {
			t.Errorf("listChanged flood: %d notifications on the session, want 300", n)
		}
		if msg := do(t, s, sess, faultCall(17, "fault_flood", `{"kind":"progress"}`)).reply(t); !bytes.Contains(msg, []byte(`"isError":true`)) {
			t.Errorf("progress flood without a token: %s", msg)
		}
	})
	t.Run("never-answer", func(t *testing.T) {
		r := do(t, s, sess, faultCall(18, "fault_never_answer", `{}`))
		s.Serve(scan(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":18}}`), sess, newRecorder())
		r.wait(t)
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.replies) != 0 || r.dones != 1 {
			t.Errorf("cancelled: %d replies, %d dones; want none and one", len(r.replies), r.dones)
		}
	})
	t.Run("never-answer-forgotten", func(t *testing.T) {
		r := do(t, s, sess, faultCall(19, "fault_never_answer", `{}`))
		r.wait(t) // MaxSleep, 2s
		if len(r.replies) != 0 || r.dones != 1 {
			t.Errorf("at MaxSleep: %d replies, %d dones; want none and one", len(r.replies), r.dones)
		}
	})
}

// TestSlowBytesStdio: on stdio the answer line is trickled, whole and in one piece,
// among the other messages.
func TestSlowBytesStdio(t *testing.T) {
	s := newTestServer(t, Config{Faults: FaultSlowBytes})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(t.Context(), inR, outW) }()
	go func() {
		io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
		io.WriteString(inW, faultCall(2, "fault_slow_bytes", `{"msPerByte":1}`)+"\n")
		io.WriteString(inW, faultCall(3, "echo", `{"text":"hi"}`)+"\n")
	}()
	sc := bufio.NewScanner(outR)
	seen := map[string]bool{}
	deadline := time.AfterFunc(waitLimit, func() { outR.Close() })
	defer deadline.Stop()
	for len(seen) < 3 && sc.Scan() {
		var m codec.Message
		if err := codec.Scan(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		seen[string(m.ID)] = true
		if string(m.ID) == "2" && !bytes.Contains(sc.Bytes(), []byte("one byte at a time")) {
			t.Errorf("slow answer: %s", sc.Text())
		}
	}
	if len(seen) != 3 {
		t.Fatalf("answers seen: %v", seen)
	}
	inW.Close()
	outR.Close()
	<-done
}
