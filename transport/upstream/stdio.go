package upstream

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/internal/defaults"
	"github.com/mcprouter/mcprouter/transport/logsafe"
)

// Command is how to start a backend's child process.
type Command struct {
	// Path is the executable; a name without a slash is looked up in PATH.
	Path string
	// Args are the arguments, without the program name.
	Args []string
	// Env holds "KEY=value" entries for the child, on top of what EnvAllow passes of
	// the router's environment.
	Env []string
	// EnvAllow names the router's environment variables the child sees: names, or
	// prefixes ending in "*". Nil means DefaultEnvAllow (servers launched through npx
	// or uvx need PATH and HOME); the rest of the router's environment, its secrets
	// included, stays with the router.
	EnvAllow []string
	// Dir is the working directory; empty means the router's.
	Dir string
}

// StdioOptions configures StartPool. The zero value is ready to use.
type StdioOptions struct {
	// Name is the backend's name: the backend attribute of every log line, stderr
	// lines included.
	Name string
	// MaxMessage bounds one line of the child's stdout; a longer line is logged and
	// dropped. Default 8 MiB.
	MaxMessage int
	// QueueLen bounds the messages waiting to be written to one child's stdin; Send
	// blocks (within its ctx) when it is full. Default 256.
	QueueLen int
	// BackoffMin and BackoffMax bound the delay before restarting an exited child; it
	// doubles from min to max with each quick exit. Defaults 100ms and 30s.
	BackoffMin, BackoffMax time.Duration
	// StableAfter is how long a child must run for its next exit to restart it after
	// BackoffMin again. Default 10s.
	StableAfter time.Duration
	// StopTimeout is each step of stopping a child: after its stdin is closed it has
	// this long to exit, then SIGTERM and the same again, then SIGKILL. Default 2s.
	StopTimeout time.Duration
	// InitTimeout bounds replaying the handshake to a restarted child. Default 30s.
	InitTimeout time.Duration
	// NoRestart leaves an exited child down for good: its instance dies (Done closed).
	NoRestart bool
	// NoRenew disables the handshake replay: a restarted child is reported with
	// EventUp and the router initializes it.
	NoRenew bool
	// StderrLevel is the level of the child's stderr lines in the log. Default Info:
	// MCP servers use stderr for all their logging, not only errors.
	StderrLevel slog.Level
	// Logger receives the logs, with attributes backend and instance. Default
	// slog.Default().
	Logger *slog.Logger
}

const (
	defaultQueueLen    = 256
	defaultBackoffMin  = 100 * time.Millisecond
	defaultBackoffMax  = 30 * time.Second
	defaultStableAfter = 10 * time.Second
	defaultStopTimeout = 2 * time.Second
	// maxStderrLine bounds one logged stderr line; the rest of a longer line is dropped.
	maxStderrLine = 4 << 10
	// stderrLinesPerSec and stderrBurst rate-limit the logged stderr lines of a child.
	stderrLinesPerSec, stderrBurst = 20, 100
	// readerGrace is how long the pipe readers may take to reach EOF after the child
	// exited (a grandchild may hold the pipes) before their ends are closed.
	readerGrace = time.Second
)

func (o StdioOptions) withDefaults() StdioOptions {
	o.Name = cmp.Or(o.Name, "backend")
	o.MaxMessage = defaults.Positive(o.MaxMessage, DefaultMaxMessage)
	o.QueueLen = defaults.Positive(o.QueueLen, defaultQueueLen)
	o.BackoffMin, o.BackoffMax = backoffRange(o.BackoffMin, o.BackoffMax, defaultBackoffMin, defaultBackoffMax)
	o.StableAfter = defaults.Positive(o.StableAfter, defaultStableAfter)
	o.StopTimeout = defaults.Positive(o.StopTimeout, defaultStopTimeout)
	o.InitTimeout = defaults.Positive(o.InitTimeout, defaultInitTimeout)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Pool is N supervised child processes of one stdio backend. Each instance is a Conn of
// its own (its own MCP session, its own id space); the router picks one per session or
// per request.
type Pool struct {
	insts []*Instance
}

// StartPool starts n instances of cmd. It fails, stopping whatever it started, if any
// first start fails (a wrong path is better reported now than retried forever); later
// exits are restarted with backoff. sinkFor gives each instance its Sink.
func StartPool(cmd Command, n int, opts StdioOptions, sinkFor func(instance int) Sink) (*Pool, error) {
	if n < 1 {
		return nil, errors.New("upstream: StartPool needs at least one instance")
	}
	if cmd.Path == "" {
		return nil, errors.New("upstream: StartPool needs a command")
	}
	if sinkFor == nil {
		return nil, errors.New("upstream: StartPool needs a Sink for each instance")
	}
	opts = opts.withDefaults()
	p := &Pool{insts: make([]*Instance, 0, n)}
	for i := 0; i < n; i++ {
		in := &Instance{
			cmd:   cmd,
			opts:  opts,
			index: i,
			sink:  sinkFor(i),
			log:   opts.Logger.With("backend", opts.Name, "instance", i),
		}
		// A child can write to stderr as fast as it likes; the log takes a few lines a
		// second of it (with a burst for start-up messages), and says how many it dropped.
		in.stderrLog = logsafe.Logger(in.log, stderrLinesPerSec, stderrBurst)
		in.badLog = logsafe.Logger(in.log, badLinesPerSec, badBurst)
		in.lifecycle.init()
		if in.sink == nil {
			in.sink = SinkFuncs{}
		}
		proc, err := in.start()
		if err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("upstream: %s: starting instance %d: %w", opts.Name, i, err)
		}
		in.cur.Store(proc)
		in.wg.Add(1)
		go in.supervise(proc)
		p.insts = append(p.insts, in)
	}
	return p, nil
}

// Len returns the number of instances.
func (p *Pool) Len() int { return len(p.insts) }

// Conn returns instance i (0 <= i < Len).
func (p *Pool) Conn(i int) *Instance { return p.insts[i] }

// Close stops every instance (in parallel) and waits for them.
func (p *Pool) Close() error {
	errs := make([]error, len(p.insts))
	var wg sync.WaitGroup
	for i, in := range p.insts {
		wg.Go(func() { errs[i] = in.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Instance is one supervised child process of a Pool, and a Conn to it. The child
// behind it changes when it is restarted; the Conn stays, and reports the change with
// EventDown and then EventRenewed or EventUp.
//
// Send queues msg, newline-terminated, for the child's stdin and returns; a single writer
// goroutine writes the queue, coalescing what has piled up into one write. Every line
// the child prints on stdout is delivered to the Sink; stderr lines are logged.
type Instance struct {
	lifecycle
	cmd   Command
	opts  StdioOptions
	index int
	sink  Sink
	log   *slog.Logger
	// stderrLog is log, rate-limited for the child's stderr lines (shared by restarts).
	stderrLog *slog.Logger
	// badLog is log, rate-limited for the stdout lines dropped (cut off, too long).
	badLog   *slog.Logger
	hs       handshake
	wait     waiters
	cur      atomic.Pointer[process] // the running, initialized child; nil while down
	downMu   sync.Mutex
	downErr  error
	restarts atomic.Int64
	wg       sync.WaitGroup // the supervisor
	closer
}

// Send implements Conn. It returns once msg is queued for the child's stdin (or ctx
// ends while the queue is full); an error wrapping ErrBackendDown while the child is
// down or being restarted.
func (in *Instance) Send(ctx context.Context, msg []byte) error {
	if in.ctx.Err() != nil {
		return deadErr(in.Err())
	}
	p := in.cur.Load()
	if p == nil {
		return in.downError()
	}
	// The scan records the handshake messages and books the requests the child is to
	// answer (process.unanswered), which stopping it cancels.
	var m codec.Message
	if in.hs.scan(msg, &m) == nil {
		return p.send(ctx, msg) // a batch, or something the child will judge
	}
	id := p.unanswered.sent(&m)
	err := p.send(ctx, msg)
	if err != nil && id != nil {
		p.unanswered.remove(id)
	}
	return err
}

// SetProtocolVersion implements Conn: stdio has no version header; the version only
// guards handshake replays.
func (in *Instance) SetProtocolVersion(v string) { in.hs.setVersion(v) }

// PID returns the current child's process id, 0 while down.
func (in *Instance) PID() int {
	if p := in.cur.Load(); p != nil {
		return p.pid
	}
	return 0
}

// Restarts returns how many times the child was restarted.
func (in *Instance) Restarts() int64 { return in.restarts.Load() }

// Close implements Conn: it stops the child (the requests it has not answered
// cancelled and stdin closed, then SIGTERM, then SIGKILL to its process group,
// StopTimeout apart) and waits for the supervisor.
func (in *Instance) Close() error {
	if !in.beginClose() {
		return nil
	}
	in.kill(ErrClosed)
	if !ctxtime.WaitGroup(&in.wg, 4*in.opts.StopTimeout+readerGrace+time.Second) {
		return fmt.Errorf("upstream: %s instance %d: child did not stop in time", in.opts.Name, in.index)
	}
	return nil
}

func (in *Instance) downError() error {
	in.downMu.Lock()
	defer in.downMu.Unlock()
	if in.downErr != nil {
		return in.downErr
	}
	return fmt.Errorf("%w: %s instance %d is starting", ErrBackendDown, in.opts.Name, in.index)
}

func (in *Instance) setDown(err error) {
	in.cur.Store(nil)
	in.downMu.Lock()
	in.downErr = err
	in.downMu.Unlock()
}

// supervise watches the running child p, and restarts it with backoff when it exits,
// until the Instance is closed.
func (in *Instance) supervise(p *process) {
	defer in.wg.Done()
	bo := backoff{min: in.opts.BackoffMin, max: in.opts.BackoffMax}
	for {
		if p != nil {
			select {
			case <-p.exited:
			case <-in.ctx.Done():
				in.setDown(deadErr(in.Err()))
				p.stop(in.opts.StopTimeout)
				return
			}
			if in.cur.Load() == p { // it was up: tell the router its requests are lost
				down := fmt.Errorf("%w: %s instance %d: child exited: %s", ErrBackendDown, in.opts.Name, in.index, p.exitDesc())
				in.setDown(down)
				in.log.Warn("backend process exited", "pid", p.pid, "status", p.exitDesc(), "ran", time.Since(p.started).Round(time.Millisecond))
				in.sink.Event(EventDown, down)
			}
			if in.opts.NoRestart {
				in.setDown(fmt.Errorf("%w: %s instance %d: child exited and restarts are off", ErrBackendDown, in.opts.Name, in.index))
				in.kill(in.downError())
				return
			}
			if time.Since(p.started) >= in.opts.StableAfter {
				bo.reset()
			}
		}
		if !ctxtime.Sleep(in.ctx, bo.next()) {
			return
		}
		np, err := in.start()
		if err != nil {
			in.log.Error("backend restart failed", "err", err)
			in.setDown(fmt.Errorf("%w: %s instance %d: restart failed: %w", ErrBackendDown, in.opts.Name, in.index, err))
			p = nil
			continue
		}
		in.restarts.Add(1)
		p = np
		in.bringUp(p)
	}
}

// bringUp makes a restarted child usable: it replays the recorded handshake (EventRenewed)
// or, with nothing to replay, publishes it for the router to initialize (EventUp). If the
// replay fails the child is killed, and supervise restarts it.
func (in *Instance) bringUp(p *process) {
	r, ok := in.hs.renewal()
	if !ok || in.opts.NoRenew {
		in.cur.Store(p)
		in.log.Info("backend process restarted", "pid", p.pid)
		in.sink.Event(EventUp, nil)
		return
	}
	err := in.replay(p, &r)
	if err == nil {
		in.cur.Store(p)
		in.log.Info("backend process restarted and re-initialized", "pid", p.pid)
		in.sink.Event(EventRenewed, nil)
		return
	}
	if errors.Is(err, ErrProtocol) {
		// The new child refuses the old handshake (an upgraded binary): forget it, so
		// that the next start is handed to the router to initialize afresh.
		in.hs.forget()
	}
	in.log.Warn("backend process restarted but its handshake replay failed", "pid", p.pid, "err", err)
	p.signal(syscall.SIGKILL)
}

// replay sends the handshake to p and waits for the reply.
func (in *Instance) replay(p *process, r *renewal) error {
	ctx, cancel := context.WithTimeout(in.ctx, in.opts.InitTimeout)
	defer cancel()
	replyCh := in.wait.add(r.id)
	defer in.wait.remove(r.id)
	if err := p.send(ctx, r.init); err != nil {
		return err
	}
	select {
	case reply := <-replyCh:
		if err := r.check(reply); err != nil {
			return err
		}
	case <-p.procExited:
		return fmt.Errorf("%w: child exited during its handshake", ErrBackendDown)
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.initialized != nil {
		return p.send(ctx, r.initialized)
	}
	return nil
}

// process is one child process's lifetime.
type process struct {
	in      *Instance
	cmd     *exec.Cmd
	pid     int
	started time.Time
	log     *slog.Logger

	stdin          *os.File // write end, the writer's (wait closes it once the child exited)
	stdout, stderr *os.File // read ends, owned by the readers

	queue      chan *[]byte
	closeIn    chan struct{} // closed to ask the writer to flush and close stdin
	closeOnce  sync.Once
	writerDone chan struct{}
	procExited chan struct{} // closed when Wait returned
	exited     chan struct{} // closed when everything of the process is finished
	readers    sync.WaitGroup
	exitErr    error // set before procExited is closed
	// unanswered is the requests written to this child and not answered yet: stop
	// cancels them before it closes stdin.
	unanswered unanswered
}

// start launches the child and its goroutines.
func (in *Instance) start() (*process, error) {
	cmd := exec.Command(in.cmd.Path, in.cmd.Args...)
	cmd.Env = allowedEnv(os.Environ(), in.cmd.EnvAllow, in.cmd.Env)
	cmd.Dir = in.cmd.Dir
	setProcGroup(cmd)
	// Our own pipes, not cmd's: exec's would be closed by Wait before the readers have
	// delivered the last lines.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	files = append(files, inR, inW)
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	files = append(files, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	files = append(files, errR, errW)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child has its copies; ours of its ends must go, or we would never see EOF.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	p := &process{
		in:         in,
		cmd:        cmd,
		pid:        cmd.Process.Pid,
		started:    time.Now(),
		log:        in.log.With("pid", cmd.Process.Pid),
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		queue:      make(chan *[]byte, in.opts.QueueLen),
		closeIn:    make(chan struct{}),
		writerDone: make(chan struct{}),
		procExited: make(chan struct{}),
		exited:     make(chan struct{}),
	}
	p.readers.Add(2)
	go p.readStdout()
	go p.readStderr()
	go p.writeLoop()
	go p.wait()
	p.log.Debug("backend process started", "path", in.cmd.Path)
	return p, nil
}

// send queues a copy of msg and a newline for the writer. A send waiting for room in
// the queue (a child that does not read its stdin) ends with the Instance: Close fails
// it with ErrClosed at once, not once the child is stopped.
func (p *process) send(ctx context.Context, msg []byte) error {
	b := getBuf()
	*b = append(append(*b, msg...), '\n')
	select {
	case p.queue <- b:
		return nil
	case <-p.writerDone:
	case <-p.in.done:
		putBuf(b)
		return deadErr(p.in.Err())
	case <-ctx.Done():
		putBuf(b)
		return ctx.Err()
	}
	putBuf(b)
	return fmt.Errorf("%w: %s instance %d: child's stdin is closed", ErrBackendDown, p.in.opts.Name, p.in.index)
}

// writeLoop is the only writer of the child's stdin.
func (p *process) writeLoop() {
	defer close(p.writerDone)
	defer p.stdin.Close() //nolint:errcheck // the child sees EOF either way
	w := bufio.NewWriterSize(p.stdin, 32<<10)
	write := func(b *[]byte) bool {
		_, err := w.Write(*b)
		putBuf(b)
		return err == nil
	}
	for {
		select {
		case b := <-p.queue:
			ok := write(b)
			// Coalesce what piled up meanwhile into the same flush; bounded by the
			// queue's length.
			for n := len(p.queue); ok && n > 0; n-- {
				ok = write(<-p.queue)
			}
			if !ok || w.Flush() != nil {
				// A broken stdin means the child is going; wait will report it.
				return
			}
		case <-p.closeIn:
			for n := len(p.queue); n > 0; n-- {
				write(<-p.queue)
			}
			// What the child has not answered, the router no longer wants: a child
			// that finishes its calls before it exits exits at once.
			_, _ = w.Write(p.unanswered.appendCancels(nil))
			_ = w.Flush()
			return
		case <-p.procExited:
			return
		}
	}
}

// readStdout delivers each line of the child's stdout. A line dropped as too long or
// not JSON that still shows which request it answers fails that request at once (an
// error stands in for it); the log of dropped lines is rate-limited like stderr's.
func (p *process) readStdout() {
	defer p.readers.Done()
	in := p.in
	var errBuf []byte
	readLines(p.stdout, in.opts.MaxMessage, func(msg []byte) {
		p.unanswered.answered(msg)
		deliver(in.sink, &in.wait, msg)
	}, func(reason string, line []byte) {
		what := invalidWhat
		if reason == reasonTooLong {
			what = tooLargeWhat(in.opts.MaxMessage)
		}
		var answered bool
		errBuf, answered = standIn(in.sink, &in.wait, in.opts.Name, what, line, errBuf)
		in.badLog.Warn("backend broke stdio framing; line dropped", "pid", p.pid, "reason", reason,
			"failed_its_request", answered, "line", excerpt(line))
	})
}

// Why readLines drops a line.
const (
	reasonTooLong = "longer than the maximum message size"
	reasonNotJSON = "not JSON"
	reasonCutOff  = "cut off: not a whole JSON object or array"
)

// readLines reads newline-delimited JSON messages from r until it ends, handing each to
// msg (valid only during the call). Blank lines are skipped; a line that is not a JSON
// object or array (a server printing a banner on stdout), that was cut off, or that is
// longer than max goes to bad instead, with its beginning, so that one misbehaving line
// does not stop the stream.
func readLines(r io.Reader, max int, msg func([]byte), bad func(reason string, line []byte)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	tooLong := false
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if !tooLong && len(long)+len(line) > max {
				first := long // the beginning says which request the line answers
				if len(first) == 0 {
					first = line
				}
				bad(reasonTooLong, first)
				tooLong, long = true, long[:0]
			}
			if !tooLong {
				long = append(long, line...)
			}
			continue
		}
		if len(long) > 0 {
			long = append(long, line...)
			line = long
		}
		switch m := bytes.TrimSpace(line); {
		case tooLong:
			tooLong = false
		case len(m) == 0:
		case len(m) > max:
			bad(reasonTooLong, m)
		case (m[0] == '{' || m[0] == '[') && complete(m):
			msg(m)
		case m[0] == '{' || m[0] == '[':
			bad(reasonCutOff, m)
		default:
			bad(reasonNotJSON, m)
		}
		if cap(long) > maxPooledBuf {
			long = nil
		} else {
			long = long[:0]
		}
		if err != nil {
			return
		}
	}
}

// readStderr logs each line of the child's stderr, cut at maxStderrLine and
// rate-limited.
func (p *process) readStderr() {
	defer p.readers.Done()
	log := p.in.stderrLog.With("pid", p.pid)
	br := bufio.NewReaderSize(p.stderr, maxStderrLine)
	skipping := false
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if !skipping {
				log.Log(context.Background(), p.in.opts.StderrLevel, "backend stderr",
					"line", string(bytes.TrimSpace(line)), "truncated", true)
			}
			skipping = true
			continue
		}
		if !skipping {
			if l := bytes.TrimRight(line, "\r\n"); len(l) > 0 {
				log.Log(context.Background(), p.in.opts.StderrLevel, "backend stderr", "line", string(l))
			}
		}
		skipping = false
		if err != nil {
			return
		}
	}
}

// wait reaps the child, cleans up after it and closes exited.
func (p *process) wait() {
	err := p.cmd.Wait()
	p.exitErr = err
	close(p.procExited)
	// Nothing more is written to the child's stdin. A writer blocked on the pipe (full,
	// its read end held open by a process the child left outside its group) returns
	// only once the pipe is closed under it: without this, it never did, nor did
	// p.exited close, and the Instance neither restarted the child nor stopped in time.
	_ = p.stdin.Close()
	// Whatever the child left in its process group goes too: such orphans would hold
	// the pipes (and whatever else) open.
	p.signal(syscall.SIGKILL)
	rd := make(chan struct{})
	go func() { p.readers.Wait(); close(rd) }()
	t := time.NewTimer(readerGrace)
	select {
	case <-rd:
	case <-t.C:
		p.log.Warn("backend's pipes still open after it exited; closing them")
	}
	t.Stop()
	_ = p.stdout.Close()
	_ = p.stderr.Close()
	<-rd
	<-p.writerDone
	close(p.exited)
}

// stop ends the child politely, then less so: the requests it has not answered
// cancelled and stdin closed, SIGTERM, SIGKILL, each given timeout to work. It returns
// when the process is finished or after the last step.
func (p *process) stop(timeout time.Duration) {
	p.closeOnce.Do(func() { close(p.closeIn) })
	if ctxtime.Wait(p.exited, timeout) {
		return
	}
	p.signal(syscall.SIGTERM)
	if ctxtime.Wait(p.exited, timeout) {
		return
	}
	p.log.Warn("backend process ignored SIGTERM; killing it")
	p.signal(syscall.SIGKILL)
	ctxtime.Wait(p.exited, timeout+readerGrace)
}

// signal sends sig to the child's process group.
func (p *process) signal(sig syscall.Signal) {
	if err := signalGroup(p.cmd.Process, sig); err != nil && !errors.Is(err, os.ErrProcessDone) && !errors.Is(err, syscall.ESRCH) {
		p.log.Debug("signal failed", "signal", sig.String(), "err", err)
	}
}

// exitDesc describes how the child ended, for logs and errors.
func (p *process) exitDesc() string {
	select {
	case <-p.procExited:
	default:
		return "running"
	}
	if p.exitErr == nil {
		return "exit status 0"
	}
	return p.exitErr.Error()
}

// DefaultEnvAllow is what a child sees of the router's environment unless told
// otherwise: what programs need to run (find commands, a home, a locale, a temporary
// directory), nothing that could be a secret.
var DefaultEnvAllow = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR", "TERM"}

// allowedEnv is a child's environment: the entries of environ that allow names (nil:
// DefaultEnvAllow), then extra (which wins over them, being later).
func allowedEnv(environ, allow, extra []string) []string {
	if allow == nil {
		allow = DefaultEnvAllow
	}
	env := make([]string, 0, len(allow)+len(extra))
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && envAllowed(name, allow) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// envAllowed matches a variable name against names and "PREFIX*" patterns.
func envAllowed(name string, allow []string) bool {
	for _, a := range allow {
		if prefix, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(name, prefix) || a == name {
			return true
		}
	}
	return false
}
