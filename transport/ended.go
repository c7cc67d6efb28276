package transport

import "sync"

// endedHere remembers the sessions this server's clients ended with DELETE, so that a
// request naming one right after is 404 and is not adopted from the session store: the
// store's delete is written after the DELETE is answered (the router's session writer),
// so until it lands the store still holds the record another instance left. Bounded:
// the oldest ids go first, by which time the store has long deleted them.
type endedHere struct {
	mu    sync.Mutex
	ids   map[string]struct{}
	order []string // ring of the ids in ids, oldest at next
	next  int
}

// endedHereMax bounds the ids remembered.
const endedHereMax = 4096

func (e *endedHere) add(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ids == nil {
		e.ids = make(map[string]struct{}, 64)
	}
	if _, ok := e.ids[id]; ok {
		return
	}
	if len(e.order) < endedHereMax {
		e.order = append(e.order, id)
	} else {
		delete(e.ids, e.order[e.next])
		e.order[e.next] = id
		e.next = (e.next + 1) % endedHereMax
	}
	e.ids[id] = struct{}{}
}

func (e *endedHere) has(id []byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.ids[string(id)]
	return ok
}
