package sse

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name  string
		id    string
		event string
		data  string
		want  string
	}{
		{"data only", "", "", `{"a":1}`, "data: {\"a\":1}\n\n"},
		{"all fields", "3-7", "message", "x", "id: 3-7\nevent: message\ndata: x\n\n"},
		{"empty data", "0-0", "", "", "id: 0-0\ndata:\n\n"},
		{"LF lines", "", "", "a\nb", "data: a\ndata: b\n\n"},
		{"CRLF lines", "", "", "a\r\nb", "data: a\ndata: b\n\n"},
		{"CR lines", "", "", "a\rb", "data: a\ndata: b\n\n"},
		{"CR LF separate", "", "", "a\r\rb\n\nc", "data: a\ndata:\ndata: b\ndata:\ndata: c\n\n"},
		{"trailing newline", "", "", "a\n", "data: a\ndata:\n\n"},
		{"leading newline", "", "", "\na", "data:\ndata: a\n\n"},
		{"only CRLF", "", "", "\r\n", "data:\ndata:\n\n"},
		{"leading space kept", "", "", " a", "data:  a\n\n"},
		{"colon in data", "", "", "a: b", "data: a: b\n\n"},
		{"id sanitized", "1\r\n2\x003", "", "x", "id: 123\ndata: x\n\n"},
		{"event sanitized", "", "ev\nent\r", "x", "event: event\ndata: x\n\n"},
		{"id all bad", "\n", "", "x", "id: \ndata: x\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var id []byte
			if tt.id != "" {
				id = []byte(tt.id)
			}
			got := string(AppendEvent([]byte("prefix|"), id, tt.event, []byte(tt.data)))
			if got != "prefix|"+tt.want {
				t.Errorf("got  %q\nwant %q", got, "prefix|"+tt.want)
			}
			// What a receiver makes of it.
			o := feedChunks(0, []byte(tt.want))
			if o.err != nil || len(o.events) != 1 {
				t.Fatalf("parsed %v %v", o.events, o.err)
			}
			wantData := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(tt.data)
			if o.events[0].Data != wantData {
				t.Errorf("parsed data %q, want %q", o.events[0].Data, wantData)
			}
		})
	}
}

func TestAppendComment(t *testing.T) {
	tests := []struct{ text, want string }{
		{"", ":\n\n"},
		{"keep-alive", ": keep-alive\n\n"},
		{"a\nb", ": a\n: b\n\n"},
		{"a\r\nb\r", ": a\n: b\n:\n\n"},
	}
	for _, tt := range tests {
		if got := string(AppendComment(nil, tt.text)); got != tt.want {
			t.Errorf("AppendComment(%q) = %q, want %q", tt.text, got, tt.want)
		}
		if o := feedChunks(0, []byte(tt.want)); len(o.events) != 0 || o.err != nil {
			t.Errorf("comment %q dispatched %v %v", tt.text, o.events, o.err)
		}
	}
}

func TestAppendRetry(t *testing.T) {
	tests := []struct {
		ms   int
		want string
	}{
		{0, "retry: 0\n\n"},
		{1500, "retry: 1500\n\n"},
		{-3, "retry: 0\n\n"},
	}
	for _, tt := range tests {
		got := AppendRetry(nil, tt.ms)
		if string(got) != tt.want {
			t.Errorf("AppendRetry(%d) = %q, want %q", tt.ms, got, tt.want)
		}
		p := NewParser(0)
		var ev Event
		if _, ok, err := p.Feed(got, &ev); ok || err != nil {
			t.Errorf("retry block dispatched an event")
		}
		if want := max(tt.ms, 0); p.Retry() != want {
			t.Errorf("retry %d, want %d", p.Retry(), want)
		}
	}
}

func TestEventID(t *testing.T) {
	valid := []EventID{
		{0, 0}, {0, 1}, {1, 0}, {7, 123456789},
		{math.MaxUint32, math.MaxUint64},
	}
	for _, id := range valid {
		text := id.Append(nil)
		if id.String() != string(text) {
			t.Errorf("String %q != Append %q", id.String(), text)
		}
		want := strconv.FormatUint(uint64(id.Stream), 10) + "-" + strconv.FormatUint(id.Seq, 10)
		if string(text) != want {
			t.Errorf("text %q, want %q", text, want)
		}
		got, ok := ParseEventID(text)
		if !ok || got != id {
			t.Errorf("ParseEventID(%q) = %v %v", text, got, ok)
		}
	}
	invalid := []string{
		"", "-", "1", "1-", "-1", "01-1", "1-01", "00-0", "+1-1", "1-+1", "1--1", "1-1-1",
		" 1-1", "1-1 ", "1 -1", "a-1", "1-a", "1_1", "1-1\n", "4294967296-1",
		"1-18446744073709551616", "1-99999999999999999999", "99999999999-1",
		"1-000000000000000000001",
	}
	for _, s := range invalid {
		if id, ok := ParseEventID([]byte(s)); ok {
			t.Errorf("ParseEventID(%q) accepted as %v", s, id)
		}
	}
}

func TestEncodeAllocs(t *testing.T) {
	dst := make([]byte, 0, 1024)
	id := EventID{Stream: 3, Seq: 99}
	data := []byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n")
	n := testing.AllocsPerRun(100, func() {
		var idb [maxEventIDLen]byte
		b := AppendEvent(dst[:0], id.Append(idb[:0]), "message", data)
		b = AppendComment(b, keepAliveText)
		b = AppendRetry(b, 1000)
		if _, ok := ParseEventID(idb[:len(id.Append(idb[:0]))]); !ok {
			t.Fatal("parse")
		}
		_ = b
	})
	if n != 0 {
		t.Errorf("encoders allocate %v times", n)
	}
}
