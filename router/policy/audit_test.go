package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func auditEngine(t *testing.T, audit bool) (*Engine, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	e, err := New(Config{Audit: audit, Rules: issueRules, Limits: []Limit{{Name: "one", Rate: 1, Burst: 1, Key: KeyParts{KeyPrincipal}}}},
		Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Limiter: (&clock{}).limiter()})
	if err != nil {
		t.Fatal(err)
	}
	return e, &buf
}

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestAudit(t *testing.T) {
	ctx := context.Background()
	e, buf := auditEngine(t, true)
	in := mustInput(t, call("ref__echo", `{"secret":"not logged"}`))
	in.Backend = "ref"
	d := e.Decide(alice, in)
	v := e.Take(alice, in)
	e.Audit(ctx, &Event{Subject: alice, Session: "s1", Input: in, Outcome: OutcomeOK, Latency: 1500 * time.Microsecond, Decision: &d, Verdict: &v})

	denied := mustInput(t, call("ref__fail", ""))
	dd := e.Decide(alice, denied)
	e.Audit(ctx, &Event{Subject: alice, Session: "s1", Input: denied, Outcome: OutcomeDenied, Decision: &dd})

	lv := e.Take(alice, in)
	e.Audit(ctx, &Event{Subject: alice, Input: in, Outcome: OutcomeLimited, Verdict: &lv})

	got := lines(t, buf)
	if len(got) != 3 {
		t.Fatalf("%d lines: %s", len(got), buf)
	}
	want := []map[string]any{
		{"level": "INFO", "principal": "alice", "session": "s1", "method": "tools/call", "tool": "ref__echo", "backend": "ref", "outcome": "ok", "latency_ms": 1.5},
		{"level": "WARN", "principal": "alice", "method": "tools/call", "tool": "ref__fail", "outcome": "denied", "reason": "deny", "rule": "no-fail"},
		{"level": "WARN", "principal": "alice", "outcome": "limited", "limit": "one", "retry_after_ms": 1000.0},
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, got[i][k], v, got[i])
			}
		}
	}
	if strings.Contains(buf.String(), "not logged") {
		t.Error("arguments in the audit log")
	}
}

// Without audit: true, only refusals are logged.
func TestAuditOff(t *testing.T) {
	e, buf := auditEngine(t, false)
	in := mustInput(t, call("ref__echo", ""))
	e.Audit(context.Background(), &Event{Subject: alice, Input: in, Outcome: OutcomeOK})
	e.Audit(context.Background(), &Event{Subject: nil, Input: in, Outcome: OutcomeError})
	if buf.Len() != 0 {
		t.Fatalf("calls logged without audit: %s", buf)
	}
	d := e.Decide(carol, in)
	e.Audit(context.Background(), &Event{Subject: Anonymous, Input: in, Outcome: OutcomeDenied, Decision: &d})
	got := lines(t, buf)
	if len(got) != 1 || got[0]["principal"] != "anonymous" || got[0]["reason"] != "no_allow" {
		t.Fatalf("%s", buf)
	}
}
