package client

import (
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/loadgen/sdktest"
)

func TestParseSourceAddrs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{in: "", want: nil},
		{in: "127.0.0.2", want: []string{"127.0.0.2"}},
		{in: "127.0.0.2-127.0.0.4, 127.0.1.1", want: []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.1.1"}},
		{in: "127.0.0.255-127.0.1.1", want: []string{"127.0.0.255", "127.0.1.0", "127.0.1.1"}},
		{in: "::1-::1", want: []string{"::1"}},
		{in: "127.0.0.9-127.0.0.2", bad: true},
		{in: "127.0.0.1-::1", bad: true},
		{in: "127.0.0.300", bad: true},
		{in: "127.0.0.1-", bad: true},
		{in: "127.0.0.0-127.255.255.255", bad: true}, // past the bound on one range
	} {
		got, err := ParseSourceAddrs(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%q: err %v, want error %v", tc.in, err, tc.bad)
			continue
		}
		if !tc.bad && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestSourceDialerTakesTurns dials a loopback listener and checks that the
// connections come from the source addresses in turn.
func TestSourceDialerTakesTurns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sd, err := newSourceDialer([]string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for i := range 6 {
		c, err := sd.Dial(ln.Addr().String())
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		host, _, _ := net.SplitHostPort(s.RemoteAddr().String())
		got = append(got, host)
		want = append(want, []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}[i%3])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("connections came from %v, want %v", got, want)
	}
	if _, err := newSourceDialer([]string{"not-an-address"}, time.Second); err == nil {
		t.Error("a bad source address was accepted")
	}
}

// TestSessionsFromSourceAddrs opens sessions with GET streams against the SDK server
// and checks that every connection, POSTs and streams alike, came from the source
// addresses given.
func TestSessionsFromSourceAddrs(t *testing.T) {
	var c sdktest.Counters
	sdk := sdktest.StartHTTP(sdktest.NewServer(&c, 1, 10), sdktest.SessionJSON)
	defer sdk.Close()
	var mu sync.Mutex
	from := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		from[host+" "+r.Method]++
		mu.Unlock()
		sdk.Config.Handler.ServeHTTP(w, r)
	}))
	defer ts.Close()
	d, err := NewDialer(Options{URL: ts.URL + "/mcp", Stream: true, SourceAddrs: []string{"127.0.0.2", "127.0.0.3"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		s, err := d.Dial(i, time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		// Closed here, not at cleanup: the servers' Close (deferred) waits for the
		// GET streams to end.
		defer s.Close(time.Now().Add(5 * time.Second))
	}
	defer d.Close()
	mu.Lock()
	defer mu.Unlock()
	// Each GET stream holds a connection of its own; the POSTs may all share one.
	for _, k := range []string{"127.0.0.2 GET", "127.0.0.3 GET"} {
		if from[k] == 0 {
			t.Errorf("no request %q; requests by source and method: %v", k, from)
		}
	}
	if from["127.0.0.2 POST"]+from["127.0.0.3 POST"] == 0 {
		t.Errorf("no POST from the source addresses: %v", from)
	}
	for k := range from {
		if strings.HasPrefix(k, "127.0.0.1 ") {
			t.Errorf("requests from 127.0.0.1: %v", from)
		}
	}
	if _, err := NewDialer(Options{URL: ts.URL, SourceAddrs: []string{"nope"}}); err == nil {
		t.Error("NewDialer accepted a bad source address")
	}
}
