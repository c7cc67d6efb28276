package dashboards

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/router/metrics"
)

// dashboard is the part of a Grafana dashboard these tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // collapsed rows
}

func loadDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	out := map[string]dashboard{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = d
	}
	return out
}

// query is one PromQL expression of a dashboard, with where it comes from.
type query struct{ where, expr string }

func (d dashboard) queries(file string) []query {
	var out []query
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, query{file + ": " + p.Title, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out = append(out, query{file + ": variable " + v.Name, v.Definition})
		}
	}
	return out
}

var (
	// readmeMetric finds the metrics README.md names (in backquotes).
	readmeMetric = regexp.MustCompile("`(mcprouter_[a-z0-9_]+)")
	backquoted   = regexp.MustCompile("`([a-z0-9_]+)`")
	stringLit    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	metricName   = regexp.MustCompile(`\b(?:mcprouter|go|process)_[a-zA-Z0-9_]+\b`)
)

// metricsOf returns the metric names an expression reads (label values, inside quotes,
// do not count).
func metricsOf(expr string) []string {
	return metricName.FindAllString(stringLit.ReplaceAllString(expr, `""`), -1)
}

// TestDashboardsWellFormed checks what Grafana needs to import the dashboards anywhere:
// unique uids, the templated datasource and instance variables, every panel on the
// templated datasource, every query scoped to the selected instances.
func TestDashboardsWellFormed(t *testing.T) {
	uids := map[string]string{}
	for file, d := range loadDashboards(t) {
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: uid %q title %q", file, d.UID, d.Title)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s: uid %q also used by %s", file, d.UID, other)
		}
		uids[d.UID] = file
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Type
		}
		if vars["datasource"] != "datasource" || vars["instance"] != "query" {
			t.Errorf("%s: templating %v, want a datasource variable and an instance query variable", file, vars)
		}
		var walk func(ps []panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if p.Type != "row" && !strings.Contains(string(p.Datasource), "${datasource}") {
					t.Errorf("%s: panel %q datasource %s, want ${datasource}", file, p.Title, p.Datasource)
				}
				if p.Type != "row" && len(p.Targets) == 0 {
					t.Errorf("%s: panel %q has no query", file, p.Title)
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		for _, q := range d.queries(file) {
			if len(metricsOf(q.expr)) == 0 {
				t.Errorf("%s: query reads no metric: %s", q.where, q.expr)
			}
			if !strings.Contains(q.where, "variable instance") && !strings.Contains(q.expr, `instance=~"$instance"`) {
				t.Errorf("%s: query not scoped to $instance: %s", q.where, q.expr)
			}
		}
	}
}

// TestDashboardMetricsExist starts a real router with a real backend (and a virtual
// server, whose per-endpoint metrics are exported only then), drives traffic through
// it, and checks that every metric any dashboard query (or README) reads is in the
// router's /metrics output, and that the traffic moved it as the table of moves says. A
// renamed metric fails here, not on an operator's screen; so does one that is exported
// but never recorded.
func TestDashboardMetricsExist(t *testing.T) {
	s := startStackWith(t, slog.LevelInfo, nil, func(c *app.Config) {
		withTenant(c)
		c.Streams.KeepAlive = 20 * time.Millisecond // the idle legacy stream gets keep-alives
		c.Stateless = "on"                          // 2026-07-28 clients served statelessly
	})
	// A 2026-07-28 listen stream first, alone subscribed: its deliveries are timed.
	s.modernTraffic(t.Context())
	s.waitMetric("mcprouter_fanout_delivery_seconds_count", 1)
	s.traffic(t.Context())
	s.waitMetric("mcprouter_sse_keepalives_total ", 1)
	_, before := s.get("/metrics")
	figures := trafficFigures{httpBefore: metric(before, "mcprouter_http_requests_total ")}
	figures.tenantRequests = float64(s.tenantTraffic(t.Context()))
	status, exposition := s.get("/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(exposition, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		exported[name] = true
	}

	referenced := map[string][]string{}
	for file, d := range loadDashboards(t) {
		for _, q := range d.queries(file) {
			for _, m := range metricsOf(q.expr) {
				referenced[m] = append(referenced[m], q.where)
			}
		}
	}
	if len(referenced) < 30 {
		t.Fatalf("only %d metrics referenced: is the extraction broken?", len(referenced))
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range readmeMetric.FindAllStringSubmatch(string(readme), -1) {
		referenced[m[1]] = append(referenced[m[1]], "README.md")
	}
	for _, m := range metricsTable(t) {
		referenced[m] = append(referenced[m], "dashboards/README.md")
	}
	names := make([]string, 0, len(referenced))
	for m := range referenced {
		names = append(names, m)
	}
	sort.Strings(names)
	table := moves(figures)
	checked := map[string]bool{}
	for _, m := range names {
		if !exported[m] && !exported[m+"_count"] { // a histogram by its name
			t.Errorf("%s is not in /metrics; used by %v", m, referenced[m])
		}
		family := familyOf(m, table)
		mv, ok := table[family]
		switch {
		case !ok:
			t.Errorf("%s (used by %v) has no entry in moves: say what traffic moves it", family, referenced[m])
		case checked[family]:
		case mv.check == nil:
			t.Logf("%s: %s", family, mv.elsewhere)
		default:
			if err := mv.check(exposition); err != nil {
				t.Errorf("%s did not move (%s): %v", family, mv.why, err)
			}
		}
		checked[family] = true
	}
	for family := range table {
		if !checked[family] {
			t.Errorf("moves has %s, which no dashboard reads", family)
		}
	}
	t.Logf("%d metrics referenced by the dashboards and README, all exported", len(names))

	// With a fleet and NATS too: descriptions consistent (pedantic registry) and names
	// by the Prometheus conventions (promlint).
	preg := prometheus.NewPedanticRegistry()
	preg.MustRegister(s.app.Metrics)
	mfs, err := preg.Gather()
	if err != nil {
		t.Fatalf("pedantic gather: %v", err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// metricsTable returns the metrics the table of this directory's README.md lists (the
// first column of its rows, without the mcprouter_ prefix; a histogram by its name).
func metricsTable(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		for _, m := range backquoted.FindAllStringSubmatch(cells[1], -1) {
			out = append(out, metrics.Namespace+"_"+m[1])
		}
	}
	if len(out) < 50 {
		t.Fatalf("only %d metrics in README.md's table: is the extraction broken?", len(out))
	}
	return out
}

func TestMetricsOf(t *testing.T) {
	cases := map[string][]string{
		`sum(rate(mcprouter_requests_total{instance=~"$instance",outcome!="ok"}[5m]))`:                    {"mcprouter_requests_total"},
		`histogram_quantile(0.99, sum by (le) (rate(mcprouter_x_bucket{method="mcprouter_not_me"}[1m])))`: {"mcprouter_x_bucket"},
		`label_values(mcprouter_build_info, instance)`:                                                    {"mcprouter_build_info"},
		`go_goroutines / process_open_fds`:                                                                {"go_goroutines", "process_open_fds"},
	}
	for expr, want := range cases {
		if got := metricsOf(expr); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("metricsOf(%s) = %v, want %v", expr, got, want)
		}
	}
}
