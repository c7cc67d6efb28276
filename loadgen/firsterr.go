package loadgen

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/loadgen/internal/wire"
	"github.com/mcprouter/mcprouter/loadgen/stats"
)

// maxErrorMessage bounds a kept error message: a server may put a whole page in one.
const maxErrorMessage = 300

// firstErrors keeps the message of the first failure of each error class, so that a
// report (and the live view) says what went wrong, not only how often. Only the first
// failure of a class pays for its message; the others cost one lock-free lookup.
type firstErrors struct {
	msgs sync.Map      // stats.ErrKey -> string, over every operation
	byOp sync.Map      // opError -> string
	last atomic.Uint64 // the key of the latest failure, packed by packKey (0: none)
}

// opError is an error class of one recorded operation.
type opError struct {
	op  int
	key stats.ErrKey
}

// note records a failure of class key of operation op; msg makes its message, called
// only for the first failure of the class for that operation.
func (f *firstErrors) note(op int, key stats.ErrKey, msg func() string) {
	if key.Class == client.ClassNone {
		return
	}
	f.last.Store(packKey(key))
	k := opError{op, key}
	if _, ok := f.byOp.Load(k); ok {
		return
	}
	m := msg()
	if len(m) > maxErrorMessage {
		m = m[:maxErrorMessage] + "…"
	}
	f.byOp.LoadOrStore(k, m)
	f.msgs.LoadOrStore(key, m)
}

// of returns the first messages of the operations ops, by class (nil when none
// failed); for a class several of them had, the one of the first in ops.
func (f *firstErrors) of(ops []int) map[string]string {
	var out map[string]string
	for _, op := range ops {
		f.byOp.Range(func(k, v any) bool {
			oe := k.(opError)
			if oe.op != op {
				return true
			}
			if out == nil {
				out = map[string]string{}
			}
			if _, had := out[oe.key.String()]; !had {
				out[oe.key.String()] = v.(string)
			}
			return true
		})
	}
	return out
}

// latest returns the class and first message of the class of the latest failure.
func (f *firstErrors) latest() (string, string) {
	p := f.last.Load()
	if p == 0 {
		return "", ""
	}
	key := unpackKey(p)
	m, _ := f.msgs.Load(key)
	s, _ := m.(string)
	return key.String(), s
}

// all returns every class's first message, keyed as report.Report.ErrorsByClass.
func (f *firstErrors) all() map[string]string {
	out := map[string]string{}
	f.msgs.Range(func(k, v any) bool {
		out[k.(stats.ErrKey).String()] = v.(string)
		return true
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

func packKey(k stats.ErrKey) uint64 { return uint64(k.Class)<<32 | uint64(uint32(int32(k.Code))) }

func unpackKey(p uint64) stats.ErrKey {
	return stats.ErrKey{Class: client.Class(p >> 32), Code: int(int32(uint32(p)))}
}

// errorMessage is what a session error says to a human: the server's JSON-RPC error
// message, or the whole classified error.
func errorMessage(err error) string {
	var e *client.Error
	if errors.As(err, &e) && e.Class == client.ClassJSONRPC && e.Msg != "" {
		return e.Msg
	}
	return err.Error()
}

// toolErrorMessage is the text of a tools/call result with isError set.
func toolErrorMessage(result []byte) string {
	if t := wire.FirstText(result); t != "" {
		return t
	}
	return "isError set, no text content"
}
