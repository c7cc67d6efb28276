package compare

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// helperEnv makes the test binary act as a child process for the proc tests.
const helperEnv = "COMPARE_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "serve": // announce an address in two writes, then wait for SIGTERM
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		fmt.Fprint(os.Stderr, "level=INFO msg=\"mcprouter listen")
		time.Sleep(10 * time.Millisecond)
		fmt.Fprintln(os.Stderr, "ing\" addr=127.0.0.1:4242 mcp=/mcp")
		fmt.Println("admin listening addr=127.0.0.1:4343")
		select {
		case <-sig:
			os.Exit(0)
		case <-time.After(time.Minute):
			os.Exit(3)
		}
	case "exit": // fail at once
		fmt.Println("cannot listen")
		os.Exit(1)
	case "ignore-term": // ignore SIGTERM: stop must kill
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Minute)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func helper(t *testing.T, mode string, patterns ...*regexp.Regexp) *proc {
	t.Helper()
	t.Setenv(helperEnv, mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := startProc("helper-"+mode, dir, filepath.Join(dir, "out.log"), "", nil, []string{exe, "-test.run", "^$"}, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

func TestProcAnnouncesAndStops(t *testing.T) {
	p := helper(t, "serve", reRouterAddr, reAdminAddr)
	m, err := p.waitMatches(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m[0] != "127.0.0.1:4242" || m[1] != "127.0.0.1:4343" {
		t.Fatalf("matches %q", m)
	}
	if err := p.exitedEarly(); err != nil {
		t.Fatal(err)
	}
	p.stop()
	if p.exitedEarly() == nil {
		t.Fatal("still running after stop")
	}
	log, err := os.ReadFile(p.out.path())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "addr=127.0.0.1:4242") {
		t.Errorf("log file lacks the output: %q", log)
	}
}

func TestProcExitsBeforeReady(t *testing.T) {
	p := helper(t, "exit", reServingURL)
	_, err := p.waitMatches(30 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("err = %v", err)
	}
}

func TestProcKilledWhenTermIgnored(t *testing.T) {
	testbin.Long(t, "waits for the stop timeout")
	p := helper(t, "ignore-term", regexp.MustCompile(`ready`))
	if _, err := p.waitMatches(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	p.stop() // SIGTERM ignored: killed after stopTimeout
	if p.exitedEarly() == nil {
		t.Fatal("still running")
	}
}

func TestProcWaitContext(t *testing.T) {
	p := helper(t, "serve", reRouterAddr)
	if _, err := p.waitMatches(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.wait(ctx, time.Minute); err != context.Canceled {
		t.Fatalf("wait = %v, want context.Canceled", err)
	}
	if p.exitedEarly() == nil {
		t.Fatal("a cancelled wait must stop the process")
	}
}

func TestLineWatcher(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   []string
		done   bool
	}{
		{"one line", []string{"serving on http://127.0.0.1:1/mcp\n"}, []string{"http://127.0.0.1:1/mcp", ""}, false},
		{"split across writes", []string{"serving on http://127.", "0.0.1:1/mcp\nadmin listening x addr=1.2.3.4:5\n"},
			[]string{"http://127.0.0.1:1/mcp", "1.2.3.4:5"}, true},
		{"no newline yet", []string{"serving on http://127.0.0.1:1/mcp"}, []string{"", ""}, false},
		{"first match wins", []string{"serving http://a/\nserving http://b/\n"}, []string{"http://a/", ""}, false},
		{"an overlong partial line is cut", []string{strings.Repeat("x", maxLine+10), " serving http://late/\n"}, []string{"", ""}, false},
		{"a line after an overlong one matches", []string{strings.Repeat("x", maxLine+10), "\nserving http://next/\n"}, []string{"http://next/", ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "log"))
			if err != nil {
				t.Fatal(err)
			}
			w := newLineWatcher(f, []*regexp.Regexp{reServingURL, reAdminAddr})
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			w.closeFile()
			got := w.results()
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("results %q, want %q", got, tc.want)
			}
			select {
			case <-w.matched:
				if !tc.done {
					t.Error("matched closed too early")
				}
			default:
				if tc.done {
					t.Error("matched not closed")
				}
			}
		})
	}
}
