package transport

import (
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// The inbound path: every client transport turns what a client sent into exchanges the
// same way, in three steps.
//
//	split    inbound.split      the body becomes its elements (one unless it is a batch);
//	                            a broken batch or one longer than the limit is refused whole
//	scan     inbound.scan       each element is scanned once; an invalid element keeps its
//	                            error, to be answered with it
//	hand-off inbound.handOff    one exchange per element is registered on the unit's call,
//	                            the call is sealed, then each valid element goes to the
//	                            Handler and each invalid one is answered with its error
//
// An inbound owns the element views into the caller's buffer, their scans and errors, and
// the exchanges between registration and hand-off. It owns neither the bytes (the
// caller's, valid until the hand-off returns: each exchange gets its own copy) nor the
// call (the transport's output, which gathers the replies).
//
// Callers: HTTPServer.post (Streamable HTTP), HTTPServer.ServeLegacyMessage (legacy POST)
// and NATSServer.handle (one NATS request), on the goroutine that read the message (the
// fasthttp or NATS handler's); and readStdio, the stdio reader goroutine, which takes a
// batch element by element as it arrives (unit.handOne, through handOver). Nothing here
// blocks: the Handler's HandleMessage must not.
type inbound struct {
	elems [][]byte
	msgs  []codec.Message
	errs  []error     // scan error of each element, nil for a valid one
	xs    []*Exchange // the exchanges of elems, between registration and hand-off
}

// arrival is what a transport knows of the messages of one unit: their session, revision
// and carrier, whether they came as a batch, and who sent them.
type arrival struct {
	sess      *Session
	version   string
	carrier   Carrier
	batch     bool
	principal *auth.Principal
	// stateless, when set, are the headers of a request served without a session.
	stateless *StatelessHeaders
	screen    StatelessScreen
}

// batchLimitError refuses a batch with more elements than the transport's limit.
type batchLimitError struct{ max int }

func (e *batchLimitError) Error() string {
	return "batch too long: at most " + strconv.Itoa(e.max) + " elements"
}

// split makes body's elements: the body itself, or each element of a batch. A batch that
// does not split (a *codec.Error) or has more than max elements (a *batchLimitError) is
// refused whole.
func (in *inbound) split(body []byte, max int) (batch bool, err error) {
	if !codec.IsBatch(body) {
		in.elems = append(in.elems[:0], body)
		return false, nil
	}
	if in.elems, err = codec.SplitBatch(body, in.elems[:0]); err != nil {
		return true, err
	}
	if len(in.elems) > max {
		return true, &batchLimitError{max: max}
	}
	return true, nil
}

// scan scans every element once, keeping the error of each invalid one, and counts the
// requests and the invalid elements.
func (in *inbound) scan() (requests, invalid int) {
	n := len(in.elems)
	if cap(in.msgs) < n {
		in.msgs = make([]codec.Message, n)
	}
	if cap(in.errs) < n {
		in.errs = make([]error, n)
	}
	in.msgs, in.errs = in.msgs[:n], in.errs[:n]
	for i, e := range in.elems {
		in.errs[i] = scanElement(e, &in.msgs[i])
		switch {
		case in.errs[i] != nil:
			in.msgs[i].Kind = codec.KindInvalid
			invalid++
		case in.msgs[i].Kind == codec.KindRequest:
			requests++
		}
	}
	return requests, invalid
}

// firstError is the error of the first invalid element, nil when all are valid.
func (in *inbound) firstError() error {
	for _, err := range in.errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// handOff registers one exchange per scanned element on c, seals c, then hands each
// element over (handOver). Every exchange is registered and the call sealed before the
// first is handed over, so the replies go out as soon as the last exchange is answered,
// synchronously inside its x.Reply: a handler that answers and then ends the session (a
// shutdown request) does not lose its answer to the session's closing. tmp is the
// caller's scratch buffer for error replies.
func (in *inbound) handOff(c *call, h Handler, to arrival, tmp *[]byte) {
	in.xs = in.xs[:0]
	for range in.elems {
		x := newExchange()
		c.add(x)
		in.xs = append(in.xs, x)
	}
	c.seal()
	for i, x := range in.xs {
		handOver(h, x, in.elems[i], &in.msgs[i], in.errs[i], to, tmp)
	}
	clear(in.xs) // handed over: the inbound must not keep them
}

// reset drops the views and errors so that a pooled inbound pins nothing.
func (in *inbound) reset() {
	clear(in.elems)
	clear(in.msgs)
	clear(in.errs)
	in.elems, in.msgs, in.errs = in.elems[:0], in.msgs[:0], in.errs[:0]
}

// handOver gives element e, scanned into m, to h on x (registered on its call already),
// or, when err is set, answers x with the error instead. The exchange gets its own copy
// of the bytes, with m's views moved onto it: the handler may hold them after the
// transport has reused its buffer (a reply timeout, the next line of stdin).
func handOver(h Handler, x *Exchange, e []byte, m *codec.Message, err error, to arrival, tmp *[]byte) {
	if err != nil {
		code, msg, data := errorParts(err, x.own[:0])
		x.own = data
		*tmp = codec.AppendError((*tmp)[:0], nil, code, msg, data)
		x.Reply(*tmp)
		return
	}
	x.own = append(x.own[:0], e...)
	if to.stateless != nil {
		x.Stateless, x.screen = true, to.screen
		x.own = copyHeaders(x, x.own, to.stateless)
	}
	x.Raw = x.own[:len(e):len(e)]
	x.Msg = *m
	rebase(&x.Msg, e, x.Raw)
	x.Session, x.Version, x.Carrier, x.Batch, x.Principal = to.sess, to.version, to.carrier, to.batch, to.principal
	h.HandleMessage(x)
}

// errorParts maps an inbound error (a codec error, a batch too long) to the JSON-RPC
// code, message and data to answer with; data is appended to buf. Each error has one
// wording, whichever transport carried the message.
func errorParts(err error, buf []byte) (code int, msg string, data []byte) {
	switch e := err.(type) {
	case *codec.Error:
		data = append(buf, `{"offset":`...)
		data = strconv.AppendInt(data, int64(e.Offset), 10)
		data = append(data, `,"reason":`...)
		data = codec.AppendString(data, e.Reason)
		data = append(data, '}')
		if e.Code == codec.CodeParseError {
			return e.Code, "Parse error", data
		}
		return e.Code, "Invalid Request", data
	case *batchLimitError:
		return codec.CodeInvalidRequest, e.Error(), nil
	}
	return codec.CodeInvalidRequest, "Invalid Request", nil
}
