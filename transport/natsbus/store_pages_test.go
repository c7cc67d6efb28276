package natsbus

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// loads checks that s loads want under id (ok false: no record).
func loads(t *testing.T, s *SessionStore, id, want string, ok bool) {
	t.Helper()
	rec, found := s.Load(id)
	if found != ok || string(rec) != want {
		t.Fatalf("Load(%s) = %q %v, want %q %v", id, rec, found, want, ok)
	}
}

// The sessions a store names share pages of pageCap records; another instance finds
// each record from its id alone; a change or a deletion of one leaves the others of
// its page as they were, and a deleted session's room is given to the next id.
func TestSessionPages(t *testing.T) {
	sa, sb := twoStores(t)
	ids := make([]string, pageCap+6)
	recs := make([][]byte, len(ids))
	for i := range ids {
		ids[i] = sa.NewID()
		recs[i] = []byte(fmt.Sprintf("record %d", i))
		if tag, n, _, ok := pageID(ids[i]); !ok || tag != sa.pages.tag || n != uint32(i/pageCap) {
			t.Fatalf("id %d %q: page %s %d %v", i, ids[i], tag, n, ok)
		}
	}
	for i, err := range sa.SaveAll(ids, recs) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	for i, id := range ids {
		loads(t, sb, id, string(recs[i]), true)
	}
	if err := sa.Save(ids[3], []byte("changed")); err != nil {
		t.Fatal(err)
	}
	sa.Delete(ids[5])
	loads(t, sb, ids[3], "changed", true)
	loads(t, sb, ids[5], "", false)
	loads(t, sb, ids[6], string(recs[6]), true)
	if _, n, _, _ := pageID(sa.NewID()); n != 0 {
		t.Fatalf("the next id names page %d, want the room left in page 0", n)
	}
	// A nil record in a batch deletes, in a page and under a key of its own alike.
	if err := sa.Save("plain-key", []byte("plain")); err != nil {
		t.Fatal(err)
	}
	for i, err := range sa.SaveAll([]string{ids[6], "plain-key", ids[7]}, [][]byte{nil, nil, []byte("kept")}) {
		if err != nil {
			t.Fatalf("batch entry %d: %v", i, err)
		}
	}
	loads(t, sb, ids[6], "", false)
	loads(t, sb, "plain-key", "", false)
	loads(t, sb, ids[7], "kept", true)
	loads(t, sb, ids[8], string(recs[8]), true)
	if sa.Errors.Load() != 0 || sb.Errors.Load() != 0 {
		t.Fatalf("errors counted on the ordinary path: %d %d", sa.Errors.Load(), sb.Errors.Load())
	}
}

// A session of a's page carried on by b is written under its id, which is read before
// the page; when it ends on b, its tombstone hides what a's page still says. A session
// that comes back to a from b's key stays under its key.
func TestSessionPagesCarriedOn(t *testing.T) {
	sa, sb := twoStores(t)
	id, back := sa.NewID(), sa.NewID()
	for _, i := range []string{id, back} {
		if err := sa.Save(i, []byte("on a")); err != nil {
			t.Fatal(err)
		}
		if err := sb.Save(i, []byte("on b")); err != nil {
			t.Fatal(err)
		}
		loads(t, sa, i, "on b", true)
	}
	sb.Delete(id)
	loads(t, sa, id, "", false)
	loads(t, sb, id, "", false)

	// back: a read b's key above, so a writes it there from now on.
	if err := sa.Save(back, []byte("on a again")); err != nil {
		t.Fatal(err)
	}
	loads(t, sb, back, "on a again", true)
	sa.Delete(back)
	loads(t, sb, back, "", false)
}

// Writers changing sessions of one page at once lose none of each other's records.
func TestSessionPagesConcurrent(t *testing.T) {
	sa, sb := twoStores(t)
	ids := make([]string, 16)
	for i := range ids {
		ids[i] = sa.NewID()
	}
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 5 {
				rec := []byte(fmt.Sprintf("%d.%d", i, round))
				if i%2 == 0 {
					if err := sa.Save(id, rec); err != nil {
						t.Error(err)
					}
					continue
				}
				if errs := sa.SaveAll([]string{id}, [][]byte{rec}); errs[0] != nil {
					t.Error(errs[0])
				}
			}
		}()
	}
	wg.Wait()
	for i, id := range ids {
		loads(t, sb, id, fmt.Sprintf("%d.4", i), true)
	}
}

// Only ids of the exact form name a page; anything else is a key of its own.
func TestPageID(t *testing.T) {
	r16 := "Ab-_0123456789xy"
	good := r16 + "-abcdefgh-z"
	if tag, n, _, ok := pageID(good); !ok || tag != "abcdefgh" || n != 35 {
		t.Fatalf("pageID(%q) = %q %d %v", good, tag, n, ok)
	}
	for _, id := range []string{
		"", r16, strings.Repeat("0a", 16), r16 + "-abcdefgh-", r16 + "-abcdefgh-Z", r16 + "-abcdefgh-01",
		r16 + "-abcdefg-1", r16 + "_abcdefgh-1", r16[:15] + "+-abcdefgh-1", r16[:15] + "=-abcdefgh-1",
		r16[1:] + "-abcdefgh-1", r16 + "-abcdefgh-zzzzzz", r16 + "-abcdefgh--1", r16 + "-abcdefgh-+1",
		r16 + "-abcd.fgh-1",
	} {
		if _, _, _, ok := pageID(id); ok {
			t.Errorf("pageID(%q) names a page", id)
		}
		if RecordKey(id) != id {
			t.Errorf("RecordKey(%q) = %q", id, RecordKey(id))
		}
	}
	if k := RecordKey(good); k != "pg.abcdefgh.z" {
		t.Fatalf("RecordKey(%q) = %q", good, k)
	}
}

// A page is whatever bytes the bucket holds under its key: reading one never panics,
// and a page that reads whole is written back to the same entries, each one found.
func FuzzPageEntries(f *testing.F) {
	key := func(c byte) entryKey { return entryKey{c, 1, 2, 3} }
	page, _ := rewritePage(nil, map[entryKey][]byte{key(1): []byte("one"), key(2): {}})
	f.Add(page)
	f.Add([]byte{pageFormat})
	f.Add([]byte{pageFormat, 1, 2})
	f.Add(append(bytes.Clone(page), 0xff, 0xff))
	shared, _ := rewritePage(nil, map[entryKey][]byte{key(1): []byte("same"), key(2): []byte("same"), key(3): {}})
	f.Add(shared)
	k1 := key(1)
	f.Add(append(append([]byte{pageShared}, k1[:]...), 1)) // refers to itself
	f.Add(append(append([]byte{pageFormat}, k1[:]...), 3, 'o', 'l', 'd'))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, recs, err := readPage(b)
		if err != nil {
			return
		}
		again, _ := rewritePage(b, nil)
		keys2, recs2, err := readPage(again)
		if err != nil || fmt.Sprint(keys2, recs2) != fmt.Sprint(keys, recs) {
			t.Fatalf("rewritten %x (%v), read %x", again, err, b)
		}
		for i, k := range keys {
			rec, ok := findEntry(b, k)
			if !ok {
				t.Fatalf("entry %d not found", i)
			}
			if first := indexOfKey(keys, k); first == i && !bytes.Equal(rec, recs[i]) {
				t.Fatalf("entry %d: found %q, read %q", i, rec, recs[i])
			}
		}
	})
}

func readPage(b []byte) (keys []entryKey, recs [][]byte, err error) {
	err = pageEntries(b, func(k, rec []byte) bool {
		var kk entryKey
		copy(kk[:], k)
		keys, recs = append(keys, kk), append(recs, rec)
		return true
	})
	return keys, recs, err
}

func indexOfKey(keys []entryKey, k entryKey) int {
	for i, kk := range keys {
		if kk == k {
			return i
		}
	}
	return -1
}

// A page's room follows its entries: a session deleted twice frees one place, and a
// session that ended before its first record gives its place back.
func TestSessionPagesRoom(t *testing.T) {
	s, err := startBus(t, Config{}).Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pageOf := func(id string) uint32 {
		_, n, _, _ := pageID(id)
		return n
	}
	ids := make([]string, pageCap)
	recs := make([][]byte, pageCap)
	for i := range ids {
		ids[i], recs[i] = s.NewID(), []byte("r")
	}
	for i, err := range s.SaveAll(ids, recs) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	s.Delete(ids[0])
	s.Delete(ids[0])
	if n := pageOf(s.NewID()); n != 0 {
		t.Fatalf("the place of the deleted session: page %d", n)
	}
	unsaved := s.NewID()
	if n := pageOf(unsaved); n != 1 {
		t.Fatalf("page 0 is full again, yet the next id names page %d", n)
	}
	for range pageCap - 1 { // page 1 full
		s.NewID()
	}
	s.Delete(unsaved)
	if n := pageOf(s.NewID()); n != 1 {
		t.Fatalf("the place of a session without a record: page %d", n)
	}
	if n := pageOf(s.NewID()); n != 2 {
		t.Fatalf("page 1 is full again, yet the next id names page %d", n)
	}
}

// A page's records that repeat an earlier entry's are written as references to it: a
// page of pageCap sessions of one kind holds one record and a few bytes per session.
// Entries read back the same after any change (the entry referred to may go), and a
// page of the previous build's form is still read.
func TestPageSharedRecords(t *testing.T) {
	rec := []byte("\x02\n2025-11-25\x00\x01\x16a-blob-key-of-22-chars\x01\x03ref\x0cmemo://board")
	changes := map[entryKey][]byte{}
	var keys []entryKey
	for i := range pageCap {
		k := entryKey{byte(i), 7}
		keys = append(keys, k)
		changes[k] = rec
	}
	other := entryKey{0xff}
	changes[other] = []byte("another kind")
	page, c := rewritePage(nil, changes)
	if c.fresh != pageCap+1 {
		t.Fatalf("fresh %d, want %d", c.fresh, pageCap+1)
	}
	if max := 1 + (pageCap+1)*(keyLen+2) + len(rec) + 20; len(page) > max {
		t.Fatalf("a page of %d records of one kind is %d bytes, want at most %d", pageCap, len(page), max)
	}
	check := func(page []byte, gone map[entryKey]bool) {
		t.Helper()
		for _, k := range keys {
			got, ok := findEntry(page, k)
			if ok == gone[k] || ok && !bytes.Equal(got, rec) {
				t.Fatalf("entry %x: %q %v", k, got, ok)
			}
		}
		if got, ok := findEntry(page, other); !ok || string(got) != "another kind" {
			t.Fatalf("the other record: %q %v", got, ok)
		}
	}
	check(page, nil)
	// Whichever entry holds the record the others refer to, its deletion leaves them.
	gone := map[entryKey]bool{}
	for len(gone) < pageCap-1 {
		_, recs, err := readPage(page)
		if err != nil {
			t.Fatal(err)
		}
		var first entryKey
		pageEntries(page, func(k, r []byte) bool {
			copy(first[:], k)
			return !bytes.Equal(r, rec)
		})
		gone[first] = true
		page, _ = rewritePage(page, map[entryKey][]byte{first: nil})
		if _, recs2, _ := readPage(page); len(recs2) != len(recs)-1 {
			t.Fatalf("%d entries after a deletion, were %d", len(recs2), len(recs))
		}
		check(page, gone)
	}
	old := append([]byte{pageFormat}, keys[0][:]...)
	old = append(append(old, byte(len(rec))), rec...)
	if got, ok := findEntry(old, keys[0]); !ok || !bytes.Equal(got, rec) {
		t.Fatalf("a page of the previous form: %q %v", got, ok)
	}
	if again, _ := rewritePage(old, nil); again[0] != pageShared {
		t.Fatalf("a page is rewritten in form %#x", again[0])
	}
}
