package fanout

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
)

// protocolVersion is the revision the benchmark's sessions negotiate: the newest
// published one, whose GET streams start with a priming event, so that a stream's
// response head arrives as soon as the router attached it.
const protocolVersion = "2025-11-25"

// updateMethod is the notification the benchmark waits for.
const updateMethod = "notifications/resources/updated"

// endpoint is one router instance as the clients see it: its Streamable HTTP URL and a
// fasthttp client for the POSTs of every session on it.
type endpoint struct {
	url  string // http://host:port/path
	addr string // host:port, dialled by the GET streams
	path string
	hc   *fasthttp.HostClient
}

func newEndpoint(rawURL string, conns int, timeout time.Duration) (*endpoint, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("fanout: router URL %q is not http://host:port/path", rawURL)
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return &endpoint{
		url: rawURL, addr: u.Host, path: path,
		hc: &fasthttp.HostClient{
			Addr: u.Host, Name: "mcprouter-fanout", MaxConns: conns,
			ReadTimeout: timeout, WriteTimeout: timeout, MaxIdemponentCallAttempts: 1,
			// Connections stay busy for the whole setup; closing idle ones would only
			// leave sockets in TIME_WAIT.
			MaxIdleConnDuration: time.Minute,
		},
	}, nil
}

// post sends one JSON-RPC message on a session (sid "" before initialize) and returns
// the HTTP status, the Mcp-Session-Id of the response and the JSON-RPC reply, taken from
// a JSON body or from the last event of an SSE body. dst receives the reply's bytes.
func (e *endpoint) post(sid string, body []byte, timeout time.Duration, dst []byte) (status int, newSID string, reply []byte, err error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(e.url)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocolVersion)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.SetBodyRaw(body)
	if err := e.hc.DoTimeout(req, resp, timeout); err != nil {
		return 0, "", nil, err
	}
	status = resp.StatusCode()
	newSID = string(resp.Header.Peek("Mcp-Session-Id"))
	b := resp.Body()
	if bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream")) {
		// The reply is the last event with data (progress or logging could precede it).
		er := eventReader{br: bufio.NewReader(bytes.NewReader(b))}
		var last []byte
		for i := 0; i < 1<<16; i++ {
			data, err := er.Next()
			if err != nil {
				break
			}
			last = append(last[:0], data...)
		}
		b = last
	}
	return status, newSID, append(dst, b...), nil
}

// session is one benchmark client session: initialized, subscribed to the resource, and
// reading its GET stream on a connection of its own.
type session struct {
	idx    int // receiver index in the tracker
	ep     *endpoint
	sid    string
	conn   net.Conn
	events eventReader
	rcv    receiver
}

// callError is a JSON-RPC error or an unexpected reply to one of the session's requests.
type callError struct {
	step   string
	status int
	reply  []byte
}

func (e *callError) Error() string {
	return fmt.Sprintf("fanout: %s: HTTP %d, reply %.200s", e.step, e.status, e.reply)
}

// expectResult checks a reply is a JSON-RPC result (and, for a tool call, not a tool
// error).
func expectResult(step string, status int, reply []byte, tool bool) error {
	var m codec.Message
	if status != fasthttp.StatusOK || codec.Scan(reply, &m) != nil || m.Kind != codec.KindResult {
		return &callError{step: step, status: status, reply: reply}
	}
	if tool && bytes.Contains(m.Result, []byte(`"isError":true`)) {
		return &callError{step: step, status: status, reply: reply}
	}
	return nil
}

// open initializes the session, subscribes it to uri, and opens its GET stream. The
// stream is attached on the router when its response head has arrived: open returns
// then, with the head read and the connection ready for run.
func (s *session) open(uri string, timeout time.Duration) error {
	initBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion +
		`","capabilities":{},"clientInfo":{"name":"mcprouter-fanout","version":"1"}}}`)
	status, sid, reply, err := s.ep.post("", initBody, timeout, nil)
	if err != nil {
		return fmt.Errorf("fanout: initialize: %w", err)
	}
	if err := expectResult("initialize", status, reply, false); err != nil {
		return err
	}
	if sid == "" {
		return errors.New("fanout: initialize: no Mcp-Session-Id in the response")
	}
	s.sid = sid
	status, _, reply, err = s.ep.post(sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), timeout, reply[:0])
	if err != nil {
		return fmt.Errorf("fanout: notifications/initialized: %w", err)
	}
	if status != fasthttp.StatusAccepted {
		return &callError{step: "notifications/initialized", status: status, reply: reply}
	}
	sub := codec.AppendString([]byte(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":`), uri)
	sub = append(sub, "}}"...)
	status, _, reply, err = s.ep.post(sid, sub, timeout, reply[:0])
	if err != nil {
		return fmt.Errorf("fanout: resources/subscribe: %w", err)
	}
	if err := expectResult("resources/subscribe", status, reply, false); err != nil {
		return err
	}
	return s.dialStream(timeout)
}

// dialStream opens the GET stream: a TCP connection of its own, a hand-written request,
// and the response head read before returning.
func (s *session) dialStream(timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", s.ep.addr, timeout)
	if err != nil {
		return fmt.Errorf("fanout: GET stream: %w", err)
	}
	req := make([]byte, 0, 256)
	req = append(req, "GET "...)
	req = append(req, s.ep.path...)
	req = append(req, " HTTP/1.1\r\nHost: "...)
	req = append(req, s.ep.addr...)
	req = append(req, "\r\nAccept: text/event-stream\r\nMcp-Session-Id: "...)
	req = append(req, s.sid...)
	req = append(req, "\r\nMCP-Protocol-Version: "+protocolVersion+"\r\nUser-Agent: mcprouter-fanout\r\n\r\n"...)
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(req); err != nil {
		conn.Close()
		return fmt.Errorf("fanout: GET stream: %w", err)
	}
	// Small buffers: a router's event is a few hundred bytes, and there may be 10,000
	// streams in one process.
	br := bufio.NewReaderSize(conn, 2048)
	chunked, err := readHead(br)
	if err != nil {
		conn.Close()
		return fmt.Errorf("fanout: GET stream: %w", err)
	}
	conn.SetDeadline(time.Time{})
	s.conn = conn
	body := bufio.NewReaderSize(br, 1024)
	if chunked {
		body = bufio.NewReaderSize(&chunkedReader{br: br}, 1024)
	}
	s.events = eventReader{br: body}
	return nil
}

// run reads the GET stream until it ends and hands every resource update to t. It is
// the session's only goroutine; it returns when the connection is closed.
func (s *session) run(t *tracker, streamErrs *atomic.Uint64, closing *atomic.Bool) {
	var m codec.Message
	for {
		data, err := s.events.Next()
		if err != nil {
			if !closing.Load() {
				streamErrs.Add(1)
			}
			return
		}
		now := t.now()
		if codec.Scan(data, &m) == nil && m.Kind == codec.KindNotification && string(m.Method) == updateMethod {
			t.deliver(&s.rcv, now)
		}
	}
}

// touchBody is the tools/call that makes the backend change uri and notify its
// subscribers; id distinguishes the calls.
func touchBody(dst []byte, id int, uri string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, `,"method":"tools/call","params":{"name":"touch","arguments":{"uri":`...)
	dst = codec.AppendString(dst, uri)
	return append(dst, "}}}"...)
}
