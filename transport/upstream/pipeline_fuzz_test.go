package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"testing"
)

// fuzzMaxBody is the body limit the fuzz targets read responses with.
const fuzzMaxBody = 1 << 16

// fuzzStatuses are the final statuses a generated response takes (1xx, 204 and 304
// carry no body, so they cannot round-trip one).
var fuzzStatuses = []int{200, 201, 202, 400, 401, 404, 429, 500, 503}

// encodeResponse is a reference HTTP/1.1 response encoder, written simply: the body
// framed by Content-Length (chunk 0) or in chunks of at most chunk bytes.
func encodeResponse(status int, contentType string, body []byte, chunk int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d Status\r\nContent-Type: %s\r\n", status, contentType)
	if chunk == 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
		b.Write(body)
		return b.Bytes()
	}
	b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	for rest := body; len(rest) > 0; {
		n := min(chunk, len(rest))
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(rest[:n])
		b.WriteString("\r\n")
		rest = rest[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// generatedResponse is the response the reference encoder makes of a fuzz target's
// inputs (a status picked from fuzzStatuses, body framed by Content-Length or in
// chunks, JSON or SSE); false for a body over fuzzMaxBody.
func generatedResponse(statusPick uint8, body []byte, chunk uint8, sse bool) ([]byte, bool) {
	if len(body) > fuzzMaxBody {
		return nil, false
	}
	status := fuzzStatuses[int(statusPick)%len(fuzzStatuses)]
	contentType := "application/json"
	if sse && status/100 == 2 {
		contentType = "text/event-stream"
	}
	return encodeResponse(status, contentType, body, int(chunk)), true
}

// seedResponses gives a fuzz target of the response readers (FuzzPipelineReadResponse,
// FuzzExchange: data, then generatedResponse's arguments) the seeds they share. As
// arbitrary bytes: each framing (a length, chunked with a trailer, to the close), an
// interim response before the final one, SSE bodies, an error status, a length the
// body never reaches, then each of extra. As generated responses: SSE in chunks, and
// an empty body.
func seedResponses(f *testing.F, extra ...string) {
	for _, s := range append([]string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n8\r\ndata: 1\n\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n",
		"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 9\r\n\r\nnot found",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n{",
	}, extra...) {
		f.Add([]byte(s), uint8(0), []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), uint8(0), false)
	}
	f.Add([]byte{}, uint8(0), []byte("data: {}\n\n"), uint8(3), true)
	f.Add([]byte{}, uint8(2), []byte{}, uint8(5), true)
}

// checkReadBack fails t unless the response read from first (its status, content type
// and body, or err) encodes as first again.
func checkReadBack(t *testing.T, first []byte, chunk uint8, status int, contentType string, body []byte, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("response %q: %v", first, err)
	}
	if again := encodeResponse(status, contentType, body, int(chunk)); !bytes.Equal(again, first) {
		t.Fatalf("response %q read as %d %q %q, which encodes as %q", first, status, contentType, body, again)
	}
}

// readOne reads the next response from pc with the pipelined connection's reader, and
// its body (whole, or streamed to its end for an SSE reply).
func readOne(pc *pipeConn) (status int, contentType string, body []byte, err error) {
	c := &pipeCall{}
	c.body.closed = make(chan bool, 1)
	if err := pc.readResponse(c, fuzzMaxBody); err != nil {
		return 0, "", nil, err
	}
	if c.body.r == nil {
		body = append([]byte(nil), c.resp.Body()...)
	} else { // resp.Body would take the stream over: read it as the caller does
		body, err = io.ReadAll(io.LimitReader(&c.body, 1<<20))
		_ = c.resp.CloseBodyStream()
	}
	return c.resp.StatusCode(), string(c.resp.Header.ContentType()), body, err
}

// FuzzPipelineReadResponse has two parts. Arbitrary bytes, as a broken or hostile
// backend could send them, give an error or responses, never a panic or a loop.
// And a response a reference encoder made from (status, body, framing, JSON or SSE),
// followed by a second one, reads back as exactly that: re-encoded from what was read,
// it gives the bytes it came from, and the next response starts where it ended.
func FuzzPipelineReadResponse(f *testing.F) {
	seedResponses(f, "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
	f.Add([]byte{}, uint8(7), []byte("\r\n0\r\n\r\n"), uint8(1), false)
	f.Fuzz(func(t *testing.T, data []byte, statusPick uint8, body []byte, chunk uint8, sse bool) {
		pc := &pipeConn{br: bufio.NewReader(bytes.NewReader(data))}
		for range 4 {
			if _, _, _, err := readOne(pc); err != nil {
				break
			}
		}

		first, ok := generatedResponse(statusPick, body, chunk, sse)
		if !ok {
			return
		}
		next := encodeResponse(200, "application/json", []byte("{}"), 0)
		pc = &pipeConn{br: bufio.NewReader(bytes.NewReader(append(append([]byte(nil), first...), next...)))}
		gotStatus, gotType, gotBody, err := readOne(pc)
		checkReadBack(t, first, chunk, gotStatus, gotType, gotBody, err)
		if s, _, b, err := readOne(pc); err != nil || s != 200 || string(b) != "{}" {
			t.Fatalf("after %q the next response reads as %d %q %v", first, s, b, err)
		}
	})
}
