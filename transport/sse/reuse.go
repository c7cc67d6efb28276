package sse

import "io"

// NewReaderSize is NewReader with a read buffer of size bytes (the default when size <=
// 0). The buffer bounds how much one Read asks for, not the event size: a client that
// keeps one Reader per session for short replies (a POST answered as an event stream)
// wants a small one, since it holds that memory for the session's life.
func NewReaderSize(r io.Reader, size, maxEvent int) *Reader {
	if size <= 0 {
		size = readBufSize
	}
	rd := &Reader{r: r, buf: make([]byte, size)}
	rd.p.max = maxEvent
	return rd
}

// Reset makes r read a new stream from src, as a new Reader with the same limits would,
// but keeping its read buffer and the parser's buffers, so that a pooled Reader reads
// stream after stream (a reply body per call, or a reconnected stream) without
// allocating. Everything of the previous stream is forgotten: unread bytes, an
// incomplete event, a sticky error, the last event ID and the retry time (a client
// that resumes reads LastEventID and Retry before calling Reset). Reset(nil) lets a
// pooled Reader release its source between uses; Next must not be called until the
// next Reset.
func (r *Reader) Reset(src io.Reader) {
	r.r = src
	r.start, r.end = 0, 0
	r.err = nil
	p := &r.p
	limit, data, event, idTmp, idBuf, lastID := p.max, p.data, p.event, p.idTmp, p.idBuf, p.lastID
	if cap(data) > keepBuf {
		data = nil // as Feed does: one huge event must not pin its memory
	}
	// Zero everything, then put back the limit and the emptied buffers: a field added to
	// Parser later starts from its zero value here as it does in a new Reader. (This is
	// also cheaper than assigning a composite literal.)
	*p = Parser{}
	p.max = limit
	p.data, p.event, p.idTmp, p.idBuf, p.lastID = data[:0], event[:0], idTmp[:0], idBuf[:0], lastID[:0]
}
