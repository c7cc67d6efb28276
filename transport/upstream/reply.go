package upstream

import (
	"bytes"
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
)

// What a hostile or broken backend sends instead of a reply: a message cut off (a
// process that died mid-write, a stream that broke), one beyond the size limit, bytes
// that are not JSON. Where the bytes still say which request they answer, that
// request is failed at once with an error that says what happened, instead of waiting
// for its timeout; the checks are peeks at the first members, not a second parse of
// every message.

// peekResponseID returns the id of the response that b, a JSON object possibly cut off
// anywhere, starts to be: nil unless its members, read in order up to where b ends or
// stops being valid, include a complete id and a result or error member (a request or
// notification has a method, and is nobody's answer).
func peekResponseID(b []byte) []byte {
	var w codec.Walker
	if !w.Object(b) {
		return nil
	}
	var id []byte
	response := false
	for {
		key, esc, ok := w.Key()
		if !ok || esc {
			break
		}
		switch string(key) {
		case "method":
			return nil
		case "result", "error":
			response = true
		case "id":
			v, ok := w.Value()
			// A value that ends where b ends may be cut off itself ("12" of "123").
			if !ok || !endsBefore(b, v) {
				return nil
			}
			id = v
			if response {
				return id
			}
			continue
		}
		if response && id != nil {
			return id
		}
		if _, ok := w.Value(); !ok {
			break
		}
	}
	if response {
		return id
	}
	return nil
}

// endsBefore reports whether v, a view into b, ends before b does.
func endsBefore(b, v []byte) bool {
	start := cap(b) - cap(v)
	return start >= 0 && start+len(v) < len(b)
}

// complete is the cheap test of a message that was cut off: JSON text ends with the
// closing bracket of its object or array.
func complete(b []byte) bool {
	b = bytes.TrimRight(b, " \t\r\n")
	return len(b) > 0 && (b[len(b)-1] == '}' || b[len(b)-1] == ']')
}

// appendReplyError appends the JSON-RPC error that stands for a backend's reply to id
// that could not be delivered (what says why), as if the backend had sent it: the
// router hands it to the request's client like any answer.
func appendReplyError(dst, id []byte, backend, what string) []byte {
	return codec.AppendError(dst, id, codec.CodeBackendUnavailable, "backend "+backend+" "+what, nil)
}

// standIn delivers, in place of a message dropped as broken (what says how) that still
// shows which request it answers, the error that answers that request; it reports
// whether there was one. buf is scratch space, returned for reuse.
func standIn(s Sink, w *waiters, backend, what string, msg, buf []byte) ([]byte, bool) {
	id := peekResponseID(msg)
	if id == nil {
		return buf, false
	}
	buf = appendReplyError(buf[:0], id, backend, what)
	deliver(s, w, buf)
	return buf, true
}

// tooLargeWhat and invalidWhat say what was wrong with a reply, in errors and logs.
func tooLargeWhat(max int) string {
	return "sent a reply larger than the limit of " + strconv.Itoa(max) + " bytes"
}

const invalidWhat = "sent a reply that is not valid JSON"
