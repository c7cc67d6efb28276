package modern

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func testSealer(t testing.TB) (*Sealer, *time.Time) {
	t.Helper()
	s, err := NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	s.Now = func() time.Time { return now }
	return s, &now
}

func TestSealOpen(t *testing.T) {
	s, now := testSealer(t)
	m, _ := scan(t, call("sample"))
	req := RequestDigest(m)
	state := s.Seal([]byte("instance-3/req-42"), "alice", req, time.Minute)
	if strings.ContainsAny(state, `"\+/=`) {
		t.Errorf("state %q needs escaping or padding", state)
	}
	got, err := s.Open([]byte(state), "alice", req)
	if err != nil || string(got) != "instance-3/req-42" {
		t.Fatalf("Open = %q, %v", got, err)
	}

	// The retry repeats the request with other _meta, inputResponses, requestState, id
	// and whitespace: same digest.
	retry, _ := scan(t, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"sample","arguments":{ "text" : "hi" },"inputResponses":{"a":{}},"requestState":"x","_meta":{}}}`)
	if RequestDigest(retry) != req {
		t.Error("the retry's digest differs")
	}

	other, _ := scan(t, strings.Replace(call("sample"), `"hi"`, `"bye"`, 1))
	for _, tc := range []struct {
		name      string
		state     string
		principal string
		req       Digest
		advance   time.Duration
		want      error
	}{
		{"other principal", state, "mallory", req, 0, ErrStateOtherPrincipal},
		{"anonymous", state, "", req, 0, ErrStateOtherPrincipal},
		{"other request", state, "alice", RequestDigest(other), 0, ErrStateOtherRequest},
		{"expired", state, "alice", req, time.Minute, ErrStateExpired},
		{"not base64", "!!!", "alice", req, 0, ErrStateTampered},
		{"empty", "", "alice", req, 0, ErrStateTampered},
		{"truncated", state[:len(state)-4], "alice", req, 0, ErrStateTampered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*now = now.Add(tc.advance)
			defer func() { *now = now.Add(-tc.advance) }()
			if _, err := s.Open([]byte(tc.state), tc.principal, tc.req); !errors.Is(err, tc.want) {
				t.Errorf("Open: %v, want %v", err, tc.want)
			}
		})
	}

	// Every single changed byte is caught as tampering.
	raw := []byte(state)
	for i := range raw {
		c := raw[i]
		for _, r := range []byte{'A', 'B'} {
			if r == c {
				continue
			}
			raw[i] = r
			if _, err := s.Open(raw, "alice", req); !errors.Is(err, ErrStateTampered) {
				t.Fatalf("byte %d changed: %v", i, err)
			}
		}
		raw[i] = c
	}

	// A state sealed under another key is tampering too.
	s2, err := NewSealer(bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Open([]byte(state), "alice", req); !errors.Is(err, ErrStateTampered) {
		t.Errorf("other key: %v", err)
	}
	if r := RejectState(ErrStateExpired); r.Code != -32602 || r.Status != 400 || !strings.Contains(r.Message, "expired") {
		t.Errorf("RejectState %+v", r)
	}
}

func TestNewSealerKey(t *testing.T) {
	if _, err := NewSealer(make([]byte, 16)); err == nil {
		t.Error("a 16-byte key was accepted")
	}
}
