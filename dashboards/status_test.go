package dashboards

// The live status page in a real browser: headless Chromium, driven over the DevTools
// protocol on a pipe (--remote-debugging-pipe: JSON messages separated by NUL bytes on
// file descriptors 3 and 4), so no WebSocket client or driver library is needed.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// chromiumPath finds the browser: $CHROMIUM, or chromium on the PATH.
func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// needChromium returns the browser, or skips the test with the reason (fails it in CI,
// where .ci/deps.sh installs it).
func needChromium(t *testing.T) string {
	t.Helper()
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium in CI: .ci/deps.sh should have installed the Debian package chromium")
		}
		t.Skip("no Chromium (install the Debian package chromium, or set CHROMIUM): status page not tested")
	}
	return bin
}

// browser is a headless Chromium and the DevTools session of one page.
type browser struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      io.WriteCloser // its fd 3: commands
	msgs    chan cdpMessage
	nextID  int
	session string
	mu      sync.Mutex
}

type cdpMessage struct {
	ID     int             `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func startBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	cmdR, cmdW, err := os.Pipe() // we write commands, it reads fd 3
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe() // it writes fd 4, we read
	if err != nil {
		t.Fatal(err)
	}
	// No background networking, updates, sync or QUIC: the browser talks to the loopback
	// page and nothing else (on a closed network the rest fails slowly).
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-quic", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--mute-audio",
		"--user-data-dir="+t.TempDir(), "--window-size=1280,900", "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	stderr := testio.Buffer{Max: maxLog}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	outW.Close()
	b := &browser{t: t, cmd: cmd, in: cmdW, msgs: make(chan cdpMessage, 256)}
	go func() {
		defer close(b.msgs)
		br := bufio.NewReader(outR)
		for {
			raw, err := br.ReadBytes(0)
			if err != nil {
				return
			}
			var m cdpMessage
			if json.Unmarshal(raw[:len(raw)-1], &m) == nil && m.ID != 0 {
				b.msgs <- m // events (no id) are not needed
			}
		}
	}()
	t.Cleanup(func() {
		b.call("Browser.close", nil)
		cmdW.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill() // our own child, by its PID
			<-done
		}
		outR.Close()
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", stderr.String())
		}
	})
	return b
}

// call sends one DevTools command (on the page session once attached) and returns its
// result.
func (b *browser) call(method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	msg := map[string]any{"id": b.nextID, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if b.session != "" && !strings.HasPrefix(method, "Target.") && !strings.HasPrefix(method, "Browser.") {
		msg["sessionId"] = b.session
	}
	raw, _ := json.Marshal(msg)
	if _, err := b.in.Write(append(raw, 0)); err != nil {
		return nil, err
	}
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-b.msgs:
			if !ok {
				return nil, errors.New("browser closed the pipe")
			}
			if m.ID != b.nextID {
				continue
			}
			if m.Error != nil {
				return nil, fmt.Errorf("%s: %d %s", method, m.Error.Code, m.Error.Message)
			}
			return m.Result, nil
		case <-timer.C:
			return nil, fmt.Errorf("%s: no answer within %v", method, waitLimit)
		}
	}
}

func (b *browser) must(method string, params any, out any) {
	b.t.Helper()
	res, err := b.call(method, params)
	if err != nil {
		b.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			b.t.Fatalf("%s: %v: %s", method, err, res)
		}
	}
}

// open creates a page, attaches to it and navigates to url.
func (b *browser) open(url string) {
	b.t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	b.must("Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	b.must("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	b.must("Page.navigate", map[string]any{"url": url}, nil)
}

// pageState is what the status page shows, read from its DOM.
type pageState struct {
	Updates  int     `json:"updates"`
	Points   int     `json:"points"` // in the requests chart
	Total    int64   `json:"total"`
	RawRate  float64 `json:"rawRate"`
	Rate     string  `json:"rate"`
	Conn     string  `json:"conn"`
	Sessions string  `json:"sessions"`
	Backends string  `json:"backends"`
	Methods  string  `json:"methods"`
	RouterP  string  `json:"routerP50"`
	Backend  string  `json:"backendP50"`
	Scripts  int     `json:"scripts"` // <script src=...>: must be 0 (self-contained)
	Links    int     `json:"links"`   // <link rel=stylesheet|preload...>: must be 0
}

const readState = `JSON.stringify({
	updates: +(document.body.dataset.updates || 0),
	points: +(document.body.dataset.points || 0),
	total: +(document.body.dataset.total || 0),
	rawRate: +(document.body.dataset.rate || 0),
	rate: document.getElementById("rate").textContent,
	conn: document.getElementById("conn").className,
	sessions: document.getElementById("sessions").textContent,
	backends: document.getElementById("backends").textContent,
	methods: document.getElementById("methods").textContent,
	routerP50: document.getElementById("router-p50").textContent,
	backendP50: document.getElementById("backend-p50").textContent,
	scripts: document.querySelectorAll("script[src]").length,
	links: document.querySelectorAll("link[href]").length
})`

func (b *browser) state() (pageState, error) {
	var st pageState
	err := b.eval(readState, &st)
	return st, err
}

// waitState polls the page until ok holds.
func (b *browser) waitState(what string, ok func(pageState) bool) pageState {
	b.t.Helper()
	var last pageState
	var lastErr error
	if testwait.Poll(waitLimit, func() bool {
		last, lastErr = b.state()
		return lastErr == nil && ok(last)
	}) {
		return last
	}
	b.t.Fatalf("page never showed %s: last state %+v, err %v", what, last, lastErr)
	return last
}

// screenshot captures the page as PNG, writes it to path and returns it.
func (b *browser) screenshot(path string) []byte {
	b.t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	b.must("Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return png
}

// screenshotDir is where screenshots go: $MCPROUTER_SCREENSHOT_DIR to keep them, or
// the test's temporary directory.
func screenshotDir(t *testing.T) string {
	if dir := os.Getenv("MCPROUTER_SCREENSHOT_DIR"); dir != "" {
		return dir
	}
	return t.TempDir()
}

// eval evaluates a JavaScript expression in the page and decodes its JSON string
// value into out.
func (b *browser) eval(expr string, out any) error {
	res, err := b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	if err != nil {
		return err
	}
	var r struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if r.Result.Value == "" {
		return errors.New("page not ready")
	}
	return json.Unmarshal([]byte(r.Result.Value), out)
}

// TestStatusPageInChromium loads the admin status page in headless Chromium while load
// runs through the router, and checks in the DOM that it loads, goes live over SSE, and
// that its numbers move: the update count, the request total and a non-zero rate, the
// backend and the method the load uses. Set MCPROUTER_SCREENSHOT_DIR to keep a
// screenshot.
func TestStatusPageInChromium(t *testing.T) {
	testbin.Long(t, "starts a router, a backend and a browser")
	bin := needChromium(t)
	s := startStack(t, slog.LevelInfo)
	ctx, cancel := context.WithCancel(context.Background())
	loaded := make(chan int64, 1)
	go func() { loaded <- s.load(ctx, 4, 1_000_000) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-loaded:
		case <-time.After(waitLimit):
			t.Error("load did not stop")
		}
	})

	b := startBrowser(t, bin)
	b.open(s.app.AdminURL() + "/")
	first := b.waitState("a first update", func(st pageState) bool { return st.Updates >= 1 && st.Conn == "live" })
	if first.Scripts != 0 || first.Links != 0 {
		t.Errorf("page loads %d external scripts and %d linked resources; it must be self-contained", first.Scripts, first.Links)
	}
	later := b.waitState("its numbers moving", func(st pageState) bool {
		return st.Updates >= first.Updates+3 && st.Total > first.Total && st.RawRate > 0
	})
	if later.Rate == "–" || later.Rate == "0" || later.Rate == "0.00" {
		t.Errorf("rate shown as %q under load", later.Rate)
	}
	if !strings.Contains(later.Backends, "demo") || !strings.Contains(later.Backends, "1/1") {
		t.Errorf("backends table: %q", later.Backends)
	}
	if !strings.Contains(later.Backends, "%") { // the pipelined share of a backend with calls
		t.Errorf("backends table without the pipelined share: %q", later.Backends)
	}
	if !strings.Contains(later.Methods, "tools/call") {
		t.Errorf("methods table: %q", later.Methods)
	}
	if n, err := strconv.Atoi(later.Sessions); err != nil || n < 4 {
		t.Errorf("sessions shown: %q, want at least the 4 load sessions", later.Sessions)
	}
	if !strings.HasSuffix(later.RouterP, "ms") || !strings.HasSuffix(later.Backend, "ms") {
		t.Errorf("latency shown: router %q backend %q", later.RouterP, later.Backend)
	}
	path := filepath.Join(screenshotDir(t), "status-page.png")
	b.screenshot(path)
	t.Logf("updates %d -> %d, total %d -> %d, rate %s/s; screenshot %s", first.Updates, later.Updates, first.Total, later.Total, later.Rate, path)
}
