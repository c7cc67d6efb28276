package router

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/budget"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// natsStore opens the session store of a fresh embedded NATS server (JetStream in
// memory, as records are kept by default).
func natsStore(t *testing.T) *natsbus.SessionStore {
	t.Helper()
	bus, err := natsbus.Start(natsbus.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	s, err := bus.Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// resubFleet is a Fleet that reports the subscriptions the test set and keeps those
// a carried-on session is given back.
type resubFleet struct {
	subsFleet
	mu       sync.Mutex
	resubbed map[*Session][][2]string
}

func (f *resubFleet) Resubscribe(s *Session, subs [][2]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.resubbed == nil {
		f.resubbed = map[*Session][][2]string{}
	}
	f.resubbed[s] = subs
}

func (f *resubFleet) SessionAdopted(*Session) {}

func (f *resubFleet) subsOf(s *Session) [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resubbed[s]
}

const (
	testCaps = `{"roots":{"listChanged":true},"sampling":{}}`
	testInfo = `{"name":"an-ide","title":"An IDE","version":"1.2.3"}`
)

// TestRecordEncoding: a record comes back as it was written, with its client's bytes
// inline or in a shared blob of the real store, and the JSON records of the previous
// build read as before.
func TestRecordEncoding(t *testing.T) {
	store := natsStore(t)
	rec := record{Version: V20250618, Capabilities: []byte(testCaps), ClientInfo: []byte(testInfo),
		Subs: [][2]string{{"files", "file:///a"}, {"memo", "memo://board"}}, Principal: "alice"}
	blob := appendClientBlob(nil, rec.Capabilities, rec.ClientInfo)
	key := blobKey(blob)
	if store.Share(key, blob) {
		t.Fatal("a blob seen for the first time is shared")
	}
	if !store.Share(key, blob) {
		t.Fatal("a blob seen twice is not shared")
	}
	bare := record{Version: V20251125}
	for _, c := range []struct {
		name string
		b    []byte
		want record
	}{
		{"inline", appendRecord(nil, &rec, ""), rec},
		{"shared", appendRecord(nil, &rec, key), rec},
		{"no client fields, no subscriptions, no principal", appendRecord(nil, &bare, ""), bare},
		{"previous build's JSON", []byte(`{"v":"2025-06-18","caps":` + testCaps + `,"info":` + testInfo + `,"subs":[["files","file:///a"],["memo","memo://board"]],"p":"alice"}`), rec},
	} {
		got, err := decodeRecord(c.b, store)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.Version != c.want.Version || got.Principal != c.want.Principal ||
			!bytes.Equal(got.Capabilities, c.want.Capabilities) || !bytes.Equal(got.ClientInfo, c.want.ClientInfo) ||
			!slices.Equal(got.Subs, c.want.Subs) {
			t.Errorf("%s: decoded %+v, want %+v", c.name, got, c.want)
		}
	}
	if inline, shared := len(appendRecord(nil, &rec, "")), len(appendRecord(nil, &rec, key)); shared >= inline {
		t.Errorf("a shared record is %d bytes, inline %d", shared, inline)
	}
}

// TestRecordMalformed: a record cut anywhere, or with a byte changed in its framing,
// or referring to a blob that is gone or that does not match its key, reads as no
// record (the session does not exist), never as a wrong one or a panic.
func TestRecordMalformed(t *testing.T) {
	store := natsStore(t)
	rec := record{Version: V20250618, Capabilities: []byte(testCaps), ClientInfo: []byte(testInfo),
		Subs: [][2]string{{"files", "file:///a"}}, Principal: "alice"}
	for _, b := range [][]byte{appendRecord(nil, &rec, ""), appendRecord(nil, &rec, "0123456789abcdefghijkl")} {
		for i := 0; i < len(b); i++ {
			if _, err := decodeRecord(b[:i], store); err == nil {
				t.Errorf("record cut at %d of %d decodes", i, len(b))
			}
		}
	}
	// The shared record above names a blob nobody wrote.
	if _, err := decodeRecord(appendRecord(nil, &rec, "0123456789abcdefghijkl"), store); err == nil {
		t.Error("a record whose blob is missing decodes")
	}
	// A blob stored under another blob's key is refused.
	blob := appendClientBlob(nil, rec.Capabilities, rec.ClientInfo)
	other := appendClientBlob(nil, []byte(`{}`), rec.ClientInfo)
	key := blobKey(blob)
	store.Share(key, other) // seen
	if !store.Share(key, other) {
		t.Fatal("blob not stored")
	}
	if _, err := decodeRecord(appendRecord(nil, &rec, key), store); err == nil {
		t.Error("a blob that does not match its key decodes")
	}
	for _, b := range []string{"", "\x03", "\x02\x05ab", "{\"caps\":{}}", "{not json"} {
		if _, err := decodeRecord([]byte(b), store); err == nil {
			t.Errorf("%q decodes", b)
		}
	}
	// Trailing bytes, or a subscription count beyond what follows.
	good := appendRecord(nil, &record{Version: V20250618}, "")
	if _, err := decodeRecord(append(good[:len(good):len(good)], 0), store); err == nil {
		t.Error("a record with a trailing byte decodes")
	}
	huge := append(good[:len(good)-1:len(good)-1], 0xff, 0xff, 0xff, 0xff, 0x0f)
	if _, err := decodeRecord(huge, store); err == nil {
		t.Error("a record claiming 4 billion subscriptions decodes")
	}
}

// TestRecordTakeover: sessions opened on one router are carried on by another from
// their records in a real JetStream (packed into the store's pages: the store names
// the sessions): version, capabilities, clientInfo and subscriptions. The first client of a kind carries its bytes in its record, the
// others refer to the one blob; a record of the previous build (JSON) is carried on
// too, and a record whose blob is gone is a session that does not exist.
func TestRecordTakeover(t *testing.T) {
	store := natsStore(t)
	fa := &subsFleet{}
	fa.subscribe("memo", "memo://board")
	a, err := New(Config{Name: "mcprouter", Version: "test", Store: store, Fleet: fa})
	if err != nil {
		t.Fatal(err)
	}
	a.saving.settle = time.Millisecond
	ha := newHTTPHarnessWith(t, a, transport.RegistryConfig{}, transport.HTTPConfig{})
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = ha.initializeBody(initializeWith(testCaps, testInfo))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	inline := 0
	for i, id := range ids {
		if natsbus.RecordKey(id) == id {
			t.Fatalf("session %d: id %s names no page of the store", i, id)
		}
		raw, ok := store.Load(id)
		if !ok || raw[0] != recordBinary {
			t.Fatalf("session %d: record %q %v", i, raw, ok)
		}
		if bytes.Contains(raw, []byte(`"an-ide"`)) {
			inline++
		}
	}
	if inline != 1 {
		t.Errorf("%d records carry their clientInfo, want 1 (the first written of its kind)", inline)
	}
	const legacy = "fedcba9876543210fedcba9876543210"
	if err := store.Save(legacy, []byte(`{"v":"2025-06-18","caps":{"elicitation":{}},"info":{"name":"old","version":"0"},"subs":[["files","file:///x"]]}`)); err != nil {
		t.Fatal(err)
	}
	const orphan = "00112233445566778899aabbccddeeff"
	if err := store.Save(orphan, appendRecord(nil, &record{Version: V20250618}, "AAAAAAAAAAAAAAAAAAAAAA")); err != nil {
		t.Fatal(err)
	}

	fb := &resubFleet{}
	b, err := New(Config{Name: "mcprouter", Version: "test", Store: store, Fleet: fb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	hb := newHTTPHarnessWith(t, b, transport.RegistryConfig{}, transport.HTTPConfig{Resolver: b})
	check := func(id, caps, info string, subs [][2]string) {
		t.Helper()
		if _, body := hb.post(id, V20250618, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); !strings.Contains(body, `"result":{}`) {
			t.Fatalf("ping on %s: %s", id, body)
		}
		ts, ok := hb.reg.Get([]byte(id))
		if !ok {
			t.Fatalf("%s not carried on", id)
		}
		s := sessionOf(ts)
		if s.Version() != V20250618 || string(s.ClientCapabilities()) != caps || string(s.ClientInfo()) != info {
			t.Errorf("%s carried on as %s %s %s", id, s.Version(), s.ClientCapabilities(), s.ClientInfo())
		}
		if got := fb.subsOf(s); !slices.Equal(got, subs) {
			t.Errorf("%s resubscribed %v, want %v", id, got, subs)
		}
	}
	for _, id := range ids {
		check(id, testCaps, testInfo, [][2]string{{"memo", "memo://board"}})
	}
	check(legacy, `{"elicitation":{}}`, `{"name":"old","version":"0"}`, [][2]string{{"files", "file:///x"}})
	if resp, body := hb.post(orphan, V20250618, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); resp.StatusCode != 404 {
		t.Errorf("session whose blob is gone: %d %s, want 404", resp.StatusCode, body)
	}
}

// TestRecordSettle: the changes a session makes while its record waits to be written
// (initialize, then a subscription) are one write, and a router that closes writes the
// queued records at once instead of waiting for them to settle.
func TestRecordSettle(t *testing.T) {
	store := &countingStore{SessionStore: natsStore(t)}
	f := &subsFleet{}
	r, err := New(Config{Name: "mcprouter", Version: "test", Store: store, Fleet: f})
	if err != nil {
		t.Fatal(err)
	}
	r.saving.settle = time.Hour
	h := newHTTPHarnessWith(t, r, transport.RegistryConfig{}, transport.HTTPConfig{})
	id := h.initialize(V20250618)
	ts, _ := h.reg.Get([]byte(id))
	f.subscribe("memo", "memo://board")
	sessionOf(ts).Persist()
	if n := store.count(); n != 0 {
		t.Fatalf("%d writes before the settle", n)
	}
	// Close does not wait the hour.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := store.count(); n != 1 {
		t.Errorf("%d writes, want 1", n)
	}
	raw, _ := store.Load(id)
	if rec, err := decodeRecord(raw, nil); err != nil || !slices.Equal(rec.Subs, [][2]string{{"memo", "memo://board"}}) {
		t.Errorf("record %+v %v: the subscription made while it settled is missing", rec, err)
	}
}

// countingStore counts the writes to a real store.
type countingStore struct {
	*natsbus.SessionStore
	mu    sync.Mutex
	saves int
}

func (s *countingStore) Save(id string, rec []byte) error {
	s.mu.Lock()
	s.saves++
	s.mu.Unlock()
	return s.SessionStore.Save(id, rec)
}

func (s *countingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves
}

// TestRefusedSessionGivesPagePlaceBack: a session refused at initialize after its store
// named it (here its budget share is refused) gives back the place its page kept for
// it: after a page's worth of refusals the next id still names the first page. The
// session was closed before initialize attached it, so its end used to write nothing,
// and every refusal left its page one place sparser for good.
func TestRefusedSessionGivesPagePlaceBack(t *testing.T) {
	store := natsStore(t)
	r, err := New(Config{Name: "mcprouter", Version: "test", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	h := newHTTPHarnessWith(t, r, transport.RegistryConfig{Budget: budget.New(64, 64)}, transport.HTTPConfig{})
	const refusals = 70 // more than a page holds
	for i := range refusals {
		resp, body := h.post("", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+V20250618+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if !strings.Contains(body, "memory budget") {
			t.Fatalf("initialize %d: %d %s, want the budget's refusal", i, resp.StatusCode, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.Close(ctx); err != nil { // waits for every record's write
		t.Fatal(err)
	}
	if id := store.NewID(); !strings.HasSuffix(id, "-0") {
		t.Fatalf("after %d refused sessions the next id is %s: their pages' places were not given back", refusals, id)
	}
}

// TestClientBytesShared: sessions of one kind of client share the kept capabilities
// and clientInfo (one copy, not one per session); another client's are its own, equal
// to what it sent, and a session of the first kind after it gets a copy again.
func TestClientBytesShared(t *testing.T) {
	caps, info := []byte(`{"roots":{}}`), []byte(`{"name":"a","version":"1"}`)
	var a, b, c, d Session
	a.keepClient(caps, info)
	b.keepClient(bytes.Clone(caps), bytes.Clone(info))
	if a.client != b.client {
		t.Error("two sessions of one client kept a copy each")
	}
	c.keepClient(caps, []byte(`{"name":"b","version":"1"}`))
	if c.client == a.client || string(c.ClientInfo()) != `{"name":"b","version":"1"}` || string(c.ClientCapabilities()) != string(caps) {
		t.Errorf("another client's: %s %s", c.ClientCapabilities(), c.ClientInfo())
	}
	d.keepClient(caps, nil)
	if d.ClientInfo() != nil || string(d.ClientCapabilities()) != string(caps) || cap(d.ClientCapabilities()) != len(caps) {
		t.Errorf("capabilities alone: %q %q (cap %d)", d.ClientCapabilities(), d.ClientInfo(), cap(d.ClientCapabilities()))
	}
	if string(a.ClientCapabilities()) != string(caps) || string(a.ClientInfo()) != string(info) || cap(a.ClientCapabilities()) != len(caps) {
		t.Errorf("the first session's bytes changed: %s %s", a.ClientCapabilities(), a.ClientInfo())
	}
	var e Session
	e.keepClient(nil, nil)
	if e.client != nil || e.ClientCapabilities() != nil || e.ClientInfo() != nil || e.recordBytes() != sessionOverhead {
		t.Errorf("no client fields: kept %+v", e.client)
	}
}
