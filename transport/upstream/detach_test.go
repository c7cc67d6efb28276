package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// detachRec is a Detacher that hands the outcome to the test.
type detachRec chan error

func (d detachRec) Detached(err error) { d <- err }

// detachCtx is the context of a Send with a Detacher: a Deadline carrying it when dl,
// WithDetach otherwise.
func detachCtx(t *testing.T, d Detacher, dl bool) context.Context {
	if dl {
		c := NewDeadline(context.Background(), time.Now().Add(waitLimit))
		t.Cleanup(c.Release)
		c.Detach(d)
		return c
	}
	return WithDetach(testCtx(t), d)
}

// TestDetachStream: under a Detacher, a request whose reply is an event stream returns
// ErrDetached as soon as the stream starts, while the backend still holds its answer;
// what the stream brings is delivered from then on, and Detached gets nil once the
// answer came. Through a context made from a Deadline too.
func TestDetachStream(t *testing.T) {
	for _, dl := range []bool{true, false} {
		release := make(chan struct{})
		srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			io.WriteString(w, `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":9,"progress":1}}`+"\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, `data: {"jsonrpc":"2.0","id":9,"result":{"ok":true}}`+"\n\n")
		})
		c, s := dialHTTP(t, srv.URL, HTTPOptions{})
		d := make(detachRec, 1)
		ctx := detachCtx(t, d, dl)
		if !dl {
			ctx = context.WithValue(ctx, struct{ k int }{1}, 1) // a context made from it
		}
		if err := c.Send(ctx, []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x"}}`)); err != ErrDetached {
			t.Fatalf("Send = %v, want ErrDetached while the backend holds its answer", err)
		}
		s.waitFor(t, "the progress", func() bool {
			return s.count(func(m *codec.Message) bool { return string(m.Method) == "notifications/progress" }) == 1
		})
		close(release)
		if err := <-d; err != nil {
			t.Fatalf("Detached(%v), want nil", err)
		}
		if s.response("9") == nil {
			t.Fatal("the response was not delivered")
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDetachJSON: a JSON reply is read by Send itself, Detacher or not.
func TestDetachJSON(t *testing.T) {
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":9,"result":{}}`)
	})
	c, s := dialHTTP(t, srv.URL, HTTPOptions{})
	defer c.Close()
	d := make(detachRec, 1)
	if err := c.Send(detachCtx(t, d, true), []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x"}}`)); err != nil {
		t.Fatalf("Send = %v", err)
	}
	if s.response("9") == nil {
		t.Fatal("the response was not delivered by Send")
	}
	select {
	case err := <-d:
		t.Fatalf("Detached(%v) for a JSON reply", err)
	default:
	}
}

// TestDetachBroken: a detached stream that breaks ends as Send would have: resumed with
// Last-Event-ID (Detached(nil), the answer delivered), or lost without event ids
// (Detached with ErrStreamLost).
func TestDetachBroken(t *testing.T) {
	resumable := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "e1" {
			io.WriteString(w, "id: e2\n"+`data: {"jsonrpc":"2.0","id":9,"result":{"ok":true}}`+"\n\n")
			return
		}
		io.WriteString(w, "id: e1\nretry: 1\n"+`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":9,"progress":1}}`+"\n\n")
	})
	lost := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		io.WriteString(w, `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":9,"progress":1}}`+"\n\n")
	})
	for _, tc := range []struct {
		url  string
		want error
	}{{resumable.URL, nil}, {lost.URL, ErrStreamLost}} {
		c, s := dialHTTP(t, tc.url, HTTPOptions{})
		d := make(detachRec, 1)
		if err := c.Send(detachCtx(t, d, true), []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x"}}`)); err != ErrDetached {
			t.Fatalf("Send = %v, want ErrDetached", err)
		}
		err := <-d
		if tc.want == nil && (err != nil || s.response("9") == nil) {
			t.Fatalf("resumed: Detached(%v), response %s", err, s.response("9"))
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Fatalf("lost: Detached(%v), want %v", err, tc.want)
		}
		c.Close()
	}
}

// TestDetachCloseWaits: Close ends a detached stream still being read, and returns
// once its goroutine has told its Detacher.
func TestDetachCloseWaits(t *testing.T) {
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c, _ := dialHTTP(t, srv.URL, HTTPOptions{})
	d := make(detachRec, 1)
	if err := c.Send(detachCtx(t, d, true), []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x"}}`)); err != ErrDetached {
		t.Fatalf("Send = %v, want ErrDetached", err)
	}
	c.Close()
	select {
	case err := <-d:
		if err == nil {
			t.Fatal("Detached(nil) for a stream cut by Close")
		}
	default:
		t.Fatal("Close returned before the detached stream's end was told")
	}
}
