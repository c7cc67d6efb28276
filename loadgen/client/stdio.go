package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// stdioSession is a session with a child process speaking newline-delimited JSON-RPC
// on stdin/stdout (one process per session, as stdio servers serve one client each).
type stdioSession struct {
	d      *Dialer
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	wmu    sync.Mutex // serialises writes: one message per line
	ids    atomic.Uint64
	mux    *mux
	done   chan struct{} // closed when the reader has seen stdout end
	stderr *headBuffer
	info   Info
	closed atomic.Bool
}

func (d *Dialer) dialStdio(index int, deadline time.Time) (Session, error) {
	cmd := exec.Command(d.o.Command[0], d.o.Command[1:]...)
	cmd.Env = append(os.Environ(), d.o.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, transportErr("stdio", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, transportErr("stdio", err)
	}
	s := &stdioSession{d: d, cmd: cmd, stdin: stdin, done: make(chan struct{}), stderr: &headBuffer{max: 4096}}
	cmd.Stderr = s.stderr
	s.mux = newMux(index, d.o.OnNotification)
	s.mux.send = newAnswerer(func(msg []byte) { s.write(msg) })
	if err := cmd.Start(); err != nil {
		return nil, transportErr("starting "+d.o.Command[0], err)
	}
	go s.read(stdout)
	if err := handshake(s, d, deadline, &s.info); err != nil {
		s.Close(time.Now().Add(2 * time.Second))
		var e *Error
		if errors.As(err, &e) && e.Class == ClassTransport {
			if head := s.stderr.String(); head != "" {
				e.Msg += " (stderr: " + head + ")"
			}
		}
		return nil, err
	}
	return s, nil
}

// read splits stdout into lines and routes them.
func (s *stdioSession) read(stdout io.Reader) {
	defer close(s.done)
	br := bufio.NewReaderSize(stdout, 64<<10)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(line) > s.d.o.MaxMessage {
				s.mux.fail(protocolErr("stdio message too large"))
				s.kill()
				return
			}
			long = append(long, line...)
			continue
		}
		if len(long) > 0 {
			line = append(long, line...)
			long = long[:0]
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			s.mux.deliver(line, time.Now())
		}
		if err != nil {
			if s.closed.Load() {
				s.mux.fail(transportErr("session closed", ErrClosed))
			} else {
				s.mux.fail(transportErr("server process ended", err))
			}
			return
		}
	}
}

func (s *stdioSession) write(msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	// One write per message keeps the line atomic for the reader on the other side.
	msg = append(msg, '\n')
	if _, err := s.stdin.Write(msg); err != nil {
		return transportErr("writing to server", err)
	}
	return nil
}

func (s *stdioSession) Info() Info { return s.info }

// Call implements Session.
func (s *stdioSession) Call(r *Request, deadline time.Time, rep *Reply) error {
	return s.mux.call(s.ids.Add(1), r, deadline, rep, s.send)
}

// Notify implements Session.
func (s *stdioSession) Notify(method string, params []byte, deadline time.Time) error {
	return notify(method, params, deadline, s.send)
}

// send is write with the signature of the other transports' senders: a write to a pipe
// has no deadline (a child that stops reading blocks it, as it would any stdio client).
func (s *stdioSession) send(msg []byte, _ time.Time) error { return s.write(msg) }

// Close implements Session: it closes stdin, as the stdio transport prescribes, waits
// for the process to exit until deadline, and kills it after that.
func (s *stdioSession) Close(deadline time.Time) error {
	if s.closed.Swap(true) {
		return nil
	}
	s.wmu.Lock()
	s.stdin.Close()
	s.wmu.Unlock()
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		s.kill()
		<-exited
	}
	<-s.done
	return nil
}

func (s *stdioSession) kill() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}

// headBuffer keeps the first max bytes written to it (a child's stderr, for error
// messages) and discards the rest.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *headBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	if room := t.max - len(t.b); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		t.b = append(t.b, p[:room]...)
	}
	t.mu.Unlock()
	return len(p), nil
}

func (t *headBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}
