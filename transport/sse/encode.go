// Package sse is mcprouter's Server-Sent Events layer: allocation-free encoders for the
// text/event-stream format, a resumable parser for reading event streams, and Stream, a
// bounded, resumable event stream with a pump that writes it to one consumer at a time.
//
// The package knows nothing of MCP messages: an event's data is opaque bytes. It follows
// the WHATWG HTML "Server-sent events" rules for the wire format, and the MCP Streamable
// HTTP rules for what a server does with it (event ids usable as Last-Event-ID, a
// priming event, retry hints, resumption that never crosses streams).
package sse

import (
	"bytes"
	"strconv"
)

// HTTP header names and values of an event stream response. Proxies such as nginx buffer
// responses unless told not to, which would hold events back: hence X-Accel-Buffering.
const (
	ContentType       = "text/event-stream"
	HeaderLastEventID = "Last-Event-ID"
	HeaderAccelBuffer = "X-Accel-Buffering" // value "no"
	HeaderCacheCtl    = "Cache-Control"     // value "no-cache"
)

// AppendEvent appends one complete event (terminated by a blank line) to dst.
//
// An empty id or event omits that field. CR, LF and NUL cannot be represented in an id
// (NUL makes receivers ignore it), nor CR and LF in an event name, so they are dropped
// rather than allowed to break the framing. Data is split at every CR, LF or CRLF into
// one "data:" line per line, so a receiver gets it back with line breaks normalised to
// LF; empty data is one empty "data:" line, which receivers dispatch as an event with
// empty data (the MCP priming event relies on this).
func AppendEvent(dst []byte, id []byte, event string, data []byte) []byte {
	if len(id) > 0 {
		dst = append(dst, "id: "...)
		dst = appendClean(dst, id, true)
		dst = append(dst, '\n')
	}
	dst = appendBody(dst, event, data)
	return append(dst, '\n')
}

// appendBody appends the event and data lines of an event, without the id and without
// the terminating blank line. A Stream keeps its events as bodies and writes the id last
// when it sends one (the order of fields within an event does not matter to receivers):
// the copy of the data happens before the sequence number is known, outside the
// stream's lock, and one body can serve many streams (Shared).
func appendBody(dst []byte, event string, data []byte) []byte {
	if len(event) > 0 {
		dst = append(dst, "event: "...)
		dst = appendClean(dst, event, false)
		dst = append(dst, '\n')
	}
	for {
		i := lineEnd(data)
		dst = appendField(dst, "data:", data[:i])
		if i == len(data) {
			return dst
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// appendField appends one line of a field: its name and colon (":" alone makes a
// comment line), then a space and value unless value is empty. value holds no CR or
// LF. It takes a data line ([]byte) and a comment line (string) alike, each converted
// by neither.
func appendField[T ~[]byte | ~string](dst []byte, nameColon string, value T) []byte {
	dst = append(dst, nameColon...)
	if len(value) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, value...)
	}
	return append(dst, '\n')
}

// lineEnd returns the index of the first CR or LF in b, or len(b).
func lineEnd(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	if n < 0 {
		n = len(b)
	}
	if r := bytes.IndexByte(b[:n], '\r'); r >= 0 {
		return r
	}
	return n
}

// appendClean appends b without CR and LF, and without NUL when nul is set. It takes
// the id ([]byte) and the event name (string) alike; each gets its own compiled copy,
// so neither is converted.
func appendClean[T ~[]byte | ~string](dst []byte, b T, nul bool) []byte {
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\r' && b[i] != '\n' && (!nul || b[i] != 0) {
			i++
		}
		dst = append(dst, b[:i]...)
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return dst
}

// AppendComment appends a comment block (": text" lines and a blank line). Receivers
// ignore comments; servers send them as keep-alives so that idle connections are not
// closed by proxies. A multi-line text becomes one comment line per line.
func AppendComment(dst []byte, text string) []byte {
	for {
		i := 0
		for i < len(text) && text[i] != '\r' && text[i] != '\n' {
			i++
		}
		dst = appendField(dst, ":", text[:i])
		if i == len(text) {
			return append(dst, '\n')
		}
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
}

// AppendRetry appends a block that sets the receiver's reconnection time to ms
// milliseconds (negative values are sent as 0). The block carries no data, so receivers
// dispatch nothing: it only changes how long they wait before reconnecting.
func AppendRetry(dst []byte, ms int) []byte {
	dst = appendRetryLine(dst, ms)
	return append(dst, '\n')
}

func appendRetryLine(dst []byte, ms int) []byte {
	if ms < 0 {
		ms = 0
	}
	dst = append(dst, "retry: "...)
	dst = strconv.AppendUint(dst, uint64(ms), 10)
	return append(dst, '\n')
}

// EventID is the id of an event written by a Stream: the stream's id within its session
// and the event's sequence number within the stream. Sequence numbers start at 1; Seq 0
// names the position before the first event (the id of a priming event sent before any
// event). The session is not part of the id: it is known from the Mcp-Session-Id header
// that accompanies a Last-Event-ID.
//
// The text form is "<stream>-<seq>" in canonical base 10 (no sign, no leading zeros), so
// that every id has exactly one spelling.
type EventID struct {
	Stream uint32
	Seq    uint64
}

// AppendEventEnd appends what ends an event of a Stream: its id line and the blank
// line. A Stream keeps the rest of the event (its body) without it, so that one body
// serves every stream a Shared event is published to, each with its own id.
func AppendEventEnd(dst []byte, id EventID) []byte {
	dst = append(dst, "id: "...)
	dst = id.Append(dst)
	return append(dst, '\n', '\n')
}

// endLen is the length of what AppendEventEnd appends for e.
func (e EventID) endLen() int {
	return len("id: -\n\n") + digits(uint64(e.Stream)) + digits(e.Seq)
}

// digits is the number of decimal digits of v.
func digits(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// maxEventIDLen is the length of the longest EventID text: 10 + 1 + 20 digits.
const maxEventIDLen = 31

// Append appends the text form of e.
func (e EventID) Append(dst []byte) []byte {
	dst = strconv.AppendUint(dst, uint64(e.Stream), 10)
	dst = append(dst, '-')
	return strconv.AppendUint(dst, e.Seq, 10)
}

// String returns the text form of e.
func (e EventID) String() string {
	var b [maxEventIDLen]byte
	return string(e.Append(b[:0]))
}

// ParseEventID parses the text form of an EventID, as received in a Last-Event-ID header.
// Anything but the canonical form (including surrounding whitespace) is rejected: an id
// this package did not write cannot name a position in one of its streams.
func ParseEventID(b []byte) (EventID, bool) {
	if len(b) > maxEventIDLen {
		return EventID{}, false
	}
	dash := bytes.IndexByte(b, '-')
	if dash < 0 {
		return EventID{}, false
	}
	stream, ok := parseCanonical(b[:dash], 1<<32-1)
	if !ok {
		return EventID{}, false
	}
	seq, ok := parseCanonical(b[dash+1:], 1<<64-1)
	if !ok {
		return EventID{}, false
	}
	return EventID{Stream: uint32(stream), Seq: seq}, true
}

// parseCanonical parses a non-empty run of decimal digits without leading zeros that
// does not exceed max.
func parseCanonical(b []byte, max uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (max-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
