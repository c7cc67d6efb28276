package natsbus

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Session records are packed into pages. JetStream holds about 300 bytes per stored
// message whatever it carries (the message, its subject, the subject tree's leaf, the
// sequence map), and the NATS server that holds the records of a whole cluster held
// one message per session: 100,000 sessions cost it 36 MB of live heap, nearly all of
// it that overhead. A page carries the records of up to pageCap sessions that one
// router opened, so the overhead is shared.
//
// How a record is found: the router asks its store for the id of every session it
// opens (NewID), and the store names the session after a page of its own with room:
//
//	<16 random base64url characters>-<owner tag>-<page number, base 36>
//
// The owner tag is random per store, so a router that restarts writes new pages and
// never overwrites the pages of the process before it. Whoever holds the id (another
// router carrying the session on) reads the page "pg.<owner tag>.<page number>" and
// finds the record by the id's random part.
//
// Who writes a page: its owner only, whole, in the order the owner changed it (each
// write is published under the store's lock, one connection's messages reach the
// stream in order, and the client does not send a write again by itself), so the last
// write of a page holds the latest record of every one of its sessions. A router that carries on a session of another's page writes that
// session's record under the session's id as its own key (as every record was written
// before pages), and its key is read before the page: it is the newer one. When such a
// session ends, its key is overwritten with a tombstone rather than purged, so that the
// record the page still holds (its owner died, or no longer writes it) does not come
// back; the tombstone ages out with the bucket's TTL, by which time the page has too,
// unless its owner still writes it, and then the owner holds the session.
//
// Records of ids that are not of this form (the previous build's, or a client's
// choice) are their own keys, as before.

// pageCap is the most sessions one page holds: 64 records of about 80 bytes keep a
// page write near 5 KB while the per-message overhead falls to 5 bytes per session.
const pageCap = 64

// pageShared is the first byte of a page as this build writes it; the entries follow
// it, each the keyLen bytes of its id's random part and a uvarint v: v even, v/2 bytes
// of record follow; v odd, the record is that of the page's entry number (v-1)/2, an
// earlier one. A router's sessions are mostly of one kind (the same protocol version,
// the same client's shared capabilities, the same subscriptions), so most of a page's
// records repeat one before them: a page of 64 such sessions is about 1 KB, against
// 4.5 KB written whole, in the NATS server that holds every router's pages and in each
// router's copy of its own.
//
// pageFormat is the first byte of a page of the previous build, whose entries are
// each a key, a uvarint length and that many bytes of record: still read (a rolling
// upgrade carries its sessions on), never written. A build before this one does not
// read a page of this one (its client initializes again on the 404): a cluster is
// upgraded forward only, as with the records' own binary form.
const (
	pageFormat = 0x50
	pageShared = 0x51
)

// idRandom is the length of the random part of an id (base64url: keyLen random bytes,
// 96 bits), and tagLen of the owner tag. With a page number of up to six characters
// an id is at most 32 bytes, the size class of the 32 hex characters of the ids the
// transport names itself: every router holds each of its sessions' ids.
const (
	idRandom = 16
	keyLen   = 12
	tagLen   = 8
)

// entryKey finds a session's entry in its page: its id's random part, decoded.
type entryKey [keyLen]byte

// maxPage bounds the page numbers an id may name.
const maxPage = 1 << 24

// tombstone is the value under an id whose session ended on a router that carried it
// on: no record, whatever the id's page says.
var tombstone = []byte{0}

// errPage is a page that cannot be decoded.
var errPage = errors.New("nats: malformed session page")

// pages are this store's pages: the entries it has written (or is about to), and the
// room left in each for the sessions it names.
type pages struct {
	tag string

	// publish is held while pages are changed and published, so that the writes of a
	// page reach the stream in the order they were made; mu guards the fields below
	// (NewID takes only mu: naming a session never waits for a publication).
	publish sync.Mutex
	mu      sync.Mutex
	pages   []page   // by page number
	room    []uint32 // numbers of the pages with room, the one to fill next last
	// back are ids of this store's pages that came back from another router's key
	// (carried on there, then here again): their key is newer than the page, so they
	// are written under it.
	back map[string]struct{}
}

// page is one page's entries as last published, how many there are, and how many ids
// named after it have no entry yet (pending: their sessions' first records are still
// to come). A page is offered for new ids (inRoom: its number is in room) while
// entries+pending is below pageCap. The entries are counted from the page itself, so a
// session deleted twice cannot make room that is not there.
type page struct {
	buf     []byte
	entries int
	pending int
	inRoom  bool
}

// full reports whether the page has no room for another id.
func (pg *page) full() bool { return pg.entries+pg.pending >= pageCap }

func newPages() *pages {
	var b [5]byte // 40 random bits: tagLen base-32 characters
	if _, err := rand.Read(b[:]); err != nil {
		panic("natsbus: crypto/rand failed: " + err.Error())
	}
	var tag [tagLen]byte
	v := uint64(0)
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	for i := range tag {
		tag[i] = "0123456789abcdefghijklmnopqrstuv"[v&31]
		v >>= 5
	}
	return &pages{tag: string(tag[:])}
}

// NewID implements the router's sessionNamer: a fresh session id naming a page of this
// store with room.
func (s *SessionStore) NewID() string {
	p := s.pages
	var r entryKey
	if _, err := rand.Read(r[:]); err != nil {
		panic("natsbus: crypto/rand failed: " + err.Error())
	}
	p.mu.Lock()
	if len(p.room) == 0 {
		p.pages = append(p.pages, page{inRoom: true})
		p.room = append(p.room, uint32(len(p.pages)-1))
	}
	n := p.room[len(p.room)-1]
	pg := &p.pages[n]
	if pg.pending++; pg.full() {
		p.room, pg.inRoom = p.room[:len(p.room)-1], false
	}
	p.mu.Unlock()
	id := make([]byte, 0, 32)
	id = base64.RawURLEncoding.AppendEncode(id, r[:])
	id = append(id, '-')
	id = append(id, p.tag...)
	id = append(id, '-')
	return string(strconv.AppendUint(id, uint64(n), 36))
}

// pageID is where an id of the paged form says its record is: the page's owner tag and
// number, and the key its entry is found by; ok false for any other id.
func pageID(id string) (tag string, n uint32, key entryKey, ok bool) {
	if len(id) < idRandom+tagLen+3 || id[idRandom] != '-' || id[idRandom+tagLen+1] != '-' {
		return "", 0, key, false
	}
	if n, err := base64.RawURLEncoding.Decode(key[:], []byte(id[:idRandom])); err != nil || n != keyLen {
		return "", 0, key, false
	}
	tag = id[idRandom+1 : idRandom+1+tagLen]
	if !validKey(tag) {
		return "", 0, key, false
	}
	num := id[idRandom+tagLen+2:]
	v, err := strconv.ParseUint(num, 36, 32)
	if err != nil || v >= maxPage || strings.ToLower(num) != num || strconv.FormatUint(v, 36) != num {
		return "", 0, key, false
	}
	return tag, uint32(v), key, true
}

// pageKey is the bucket key of page n of the owner tag.
func pageKey(tag string, n uint32) string {
	return "pg." + tag + "." + strconv.FormatUint(uint64(n), 36)
}

// mine returns the number and entry key of id's page when this store owns it.
func (p *pages) mine(id string) (uint32, entryKey, bool) {
	tag, n, key, ok := pageID(id)
	if !ok || tag != p.tag {
		return 0, key, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, moved := p.back[id]
	return n, key, int(n) < len(p.pages) && !moved
}

// cameBack notes that id, of this store's pages, was read from another router's key.
func (p *pages) cameBack(id string) {
	tag, _, _, ok := pageID(id)
	if !ok || tag != p.tag {
		return
	}
	p.mu.Lock()
	if p.back == nil {
		p.back = map[string]struct{}{}
	}
	p.back[id] = struct{}{}
	p.mu.Unlock()
}

// forget ends what cameBack noted.
func (p *pages) forget(id string) {
	p.mu.Lock()
	delete(p.back, id)
	p.mu.Unlock()
}

// pageEntries calls each with every entry of page b in turn until it returns false;
// a malformed page is errPage (the entries before the damage have been seen).
func pageEntries(b []byte, each func(key, rec []byte) bool) error {
	if len(b) == 0 || (b[0] != pageFormat && b[0] != pageShared) {
		return errPage
	}
	shared := b[0] == pageShared
	// The records of the entries read so far, by entry number, for the references.
	recs := make([][]byte, 0, pageCap)
	b = b[1:]
	for len(b) > 0 {
		if len(b) < keyLen {
			return errPage
		}
		key := b[:keyLen]
		v, k := binary.Uvarint(b[keyLen:])
		if k <= 0 {
			return errPage
		}
		b = b[keyLen+k:]
		var rec []byte
		switch {
		case !shared:
			if v > uint64(len(b)) {
				return errPage
			}
			rec, b = b[:v:v], b[v:]
		case v&1 == 1: // the record of an earlier entry
			if v>>1 >= uint64(len(recs)) {
				return errPage
			}
			rec = recs[v>>1]
			recs = append(recs, rec)
		default:
			n := v >> 1
			if n > uint64(len(b)) {
				return errPage
			}
			rec, b = b[:n:n], b[n:]
			recs = append(recs, rec)
		}
		if !each(key, rec) {
			return nil
		}
	}
	return nil
}

// findEntry is the record of page b under key.
func findEntry(b []byte, key entryKey) ([]byte, bool) {
	var found []byte
	ok := false
	if pageEntries(b, func(k, rec []byte) bool {
		if string(k) == string(key[:]) {
			found, ok = rec, true
		}
		return !ok
	}) != nil {
		return nil, false
	}
	return found, ok
}

// pageChange is what rewritePage did to a page: whether its bytes changed, the entries
// it added (fresh) and removed (gone), and the deletions of ids that had no entry
// (their sessions ended before their first record).
type pageChange struct {
	changed              bool
	fresh, gone, unsaved int
}

// rewritePage is page b with the records of changes in place of its own (a nil record
// removes the entry), in a new buffer of the exact size (the store keeps it as its
// copy of the page), in this build's form: a record that repeats an earlier entry's
// refers to it.
func rewritePage(b []byte, changes map[entryKey][]byte) (out []byte, c pageChange) {
	w := pageWriter{out: make([]byte, 0, len(b)+changesSize(changes)+1)}
	w.out = append(w.out, pageShared)
	found := 0
	// b is well formed where it is this store's own page; bytes from elsewhere (the
	// fuzz test's) end where they stop reading.
	pageEntries(b, func(k, rec []byte) bool {
		if rec, ok := changes[entryKey(k)]; ok {
			found++
			if rec == nil {
				c.gone++
			}
			return true
		}
		w.add(k, rec)
		return true
	})
	saved := 0
	for k, rec := range changes {
		if rec != nil {
			w.add(k[:], rec)
			saved++
		}
	}
	c.fresh = saved - (found - c.gone)
	c.unsaved = len(changes) - saved - c.gone
	c.changed = saved > 0 || c.gone > 0
	return bytes.Clone(w.out), c
}

// changesSize bounds what changes add to a page.
func changesSize(changes map[entryKey][]byte) int {
	n := 0
	for _, rec := range changes {
		n += entrySize(rec)
	}
	return n
}

// pageWriter appends a page's entries, each record equal to an earlier entry's as a
// reference to it. Its records are few and distinct (one kind of session, or a few),
// so a record is compared with each distinct one before it.
type pageWriter struct {
	out     []byte
	entries int
	// distinct are the distinct records written so far, and first the number of the
	// entry that wrote each.
	distinct [][]byte
	first    []int
}

func (w *pageWriter) add(key, rec []byte) {
	w.out = append(w.out, key...)
	for i, d := range w.distinct {
		if bytes.Equal(d, rec) {
			w.out = binary.AppendUvarint(w.out, uint64(w.first[i])<<1|1)
			w.entries++
			return
		}
	}
	w.distinct, w.first = append(w.distinct, rec), append(w.first, w.entries)
	w.out = binary.AppendUvarint(w.out, uint64(len(rec))<<1)
	w.out = append(w.out, rec...)
	w.entries++
}

// counted brings page n's counts up to change c, and offers the page for new ids again
// once it has room; the caller holds p.mu.
func (p *pages) counted(n uint32, c pageChange) {
	pg := &p.pages[n]
	pg.entries += c.fresh - c.gone
	pg.pending = max(0, pg.pending-c.fresh-c.unsaved)
	if !pg.inRoom && !pg.full() {
		p.room, pg.inRoom = append(p.room, n), true
	}
}

// entrySize bounds the encoded size of an entry holding rec.
func entrySize(rec []byte) int {
	var n [binary.MaxVarintLen64]byte
	return keyLen + binary.PutUvarint(n[:], uint64(len(rec))<<1) + len(rec)
}

// pageWrite is one change of one of this store's pages, published and not yet
// acknowledged.
type pageWrite struct {
	ack jetstream.PubAckFuture
	err error
}

// publishPages applies the changes to this store's pages (page number, then entry key
// to record; nil deletes) and publishes every page that changed, under the lock so
// that a page's writes reach the stream in the order they were made.
func (s *SessionStore) publishPages(changes map[uint32]map[entryKey][]byte) map[uint32]*pageWrite {
	p := s.pages
	writes := make(map[uint32]*pageWrite, len(changes))
	p.publish.Lock()
	defer p.publish.Unlock()
	for n, c := range changes {
		p.mu.Lock()
		buf, change := rewritePage(p.pages[n].buf, c)
		if change.changed {
			p.pages[n].buf = buf
		}
		p.counted(n, change)
		p.mu.Unlock()
		w := &pageWrite{}
		writes[n] = w
		if !change.changed {
			continue
		}
		// No retry by the client: a write it sent again later (after "no responders")
		// could land after a newer write of the page. A write that fails is the
		// caller's to retry, with the page as it is then.
		if w.ack, w.err = s.js.PublishAsync(s.prefix+pageKey(p.tag, n), buf, jetstream.WithRetryAttempts(0)); w.err != nil {
			w.ack = nil
			s.Errors.Add(1)
		}
	}
	return writes
}

// waitPages waits for the acknowledgement of each write, within the store's timeout.
func (s *SessionStore) waitPages(writes map[uint32]*pageWrite) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	for _, w := range writes {
		if w.ack == nil {
			continue
		}
		if w.err = waitAck(ctx, w.ack); w.err != nil {
			s.Errors.Add(1)
		}
	}
}

// loadPaged reads the record of a paged id from its page.
func (s *SessionStore) loadPaged(id string) ([]byte, bool) {
	tag, n, key, ok := pageID(id)
	if !ok {
		return nil, false
	}
	b, ok := getTwice(s.kv, pageKey(tag, n), s.timeout, func() { s.Errors.Add(1) })
	if !ok {
		return nil, false
	}
	rec, ok := findEntry(b, key)
	if !ok {
		return nil, false
	}
	return rec, true
}

// RecordKey is the bucket key under which the router that named session id writes its
// record: its page's for an id of the paged form (the page holds other sessions'
// records too), the id itself otherwise.
func RecordKey(id string) string {
	if tag, n, _, ok := pageID(id); ok {
		return pageKey(tag, n)
	}
	return id
}
