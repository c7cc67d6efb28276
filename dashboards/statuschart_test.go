package dashboards

// The status page draws its requests chart from the first second (issue 17): a page
// opened after the traffic has passed shows it at once, from the updates the admin
// listener kept, and the test looks at the pixels, not only at the DOM.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// lineColour is the requests line's stroke in status.html (#58a6ff).
var lineColour = color.RGBA{0x58, 0xa6, 0xff, 0xff}

// chartBox is the requests chart's place on the page, in CSS pixels, and the page's
// device pixel ratio.
type chartBox struct {
	X, Y, W, H float64
	Ratio      float64
}

const readChartBox = `JSON.stringify((function () {
	var r = document.getElementById("chart").getBoundingClientRect();
	return { x: r.left, y: r.top, w: r.width, h: r.height, ratio: window.devicePixelRatio || 1 };
})())`

// TestStatusChartFromFirstSecond sends a short, bounded load through a real router,
// waits until the status feed has an update that counts it, then opens the status page
// in headless Chromium and takes a screenshot as soon as the page has its first
// updates: the requests chart must already show a line that rises off its baseline.
// (Before the admin listener kept a history, a fresh page had one point and no line.)
func TestStatusChartFromFirstSecond(t *testing.T) {
	testbin.Long(t, "starts a router, a backend and a browser")
	bin := needChromium(t)
	s := startStack(t, slog.LevelInfo)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const sessions, calls = 4, 200
	if n := s.load(ctx, sessions, calls); n != calls {
		t.Fatalf("load made %d calls, want %d", n, calls)
	}
	waitFeedTotal(t, ctx, s.app.AdminURL(), calls)

	b := startBrowser(t, bin)
	b.open(s.app.AdminURL() + "/")
	st := b.waitState("the load in its first updates", func(st pageState) bool { return st.Total >= calls })
	var box chartBox
	if err := b.eval(readChartBox, &box); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(screenshotDir(t), "status-chart.png")
	shot := b.screenshot(path)
	if st.Points < 2 {
		t.Errorf("the chart has %d points at the page's first updates; the kept history should give it several", st.Points)
	}

	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	region := image.Rect(int(box.X*box.Ratio), int(box.Y*box.Ratio), int((box.X+box.W)*box.Ratio), int((box.Y+box.H)*box.Ratio))
	if region.Empty() || !region.In(img.Bounds()) {
		t.Fatalf("chart at %v is not inside the %v screenshot", region, img.Bounds())
	}
	// The line drawn at zero lies along the bottom; traffic lifts it. Count the line's
	// pixels above the bottom quarter of the chart.
	raised := region
	raised.Max.Y = region.Min.Y + region.Dy()*3/4
	all, up := countColour(img, region, lineColour), countColour(img, raised, lineColour)
	t.Logf("page at its first updates: %d updates, %d points, total %d; chart %v: %d line pixels, %d above the baseline; screenshot %s",
		st.Updates, st.Points, st.Total, region, all, up, path)
	if up < 3 {
		t.Errorf("the requests chart shows no traffic in the screenshot (%d line pixels, %d above its bottom quarter) after %d calls", all, up, calls)
	}
}

// waitFeedTotal reads the admin /events stream until an update counts at least total
// requests, so that the page opened next has the load in its history.
func waitFeedTotal(t *testing.T, ctx context.Context, adminURL string, total uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // leaves the stream: the viewer slot is free again
	req, _ := http.NewRequestWithContext(ctx, "GET", adminURL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var u struct {
			Requests struct {
				Total uint64 `json:"total"`
			} `json:"requests"`
		}
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			t.Fatalf("status update: %v: %s", err, data)
		}
		if u.Requests.Total >= total {
			return
		}
	}
	t.Fatalf("no status update counted %d requests: %v", total, sc.Err())
}

// countColour counts the pixels of r in img within a small distance of c per channel
// (anti-aliased edges blend with the panel; the line's middle is its colour).
func countColour(img image.Image, r image.Rectangle, c color.RGBA) int {
	near := func(a uint32, b uint8) bool {
		d := int(a>>8) - int(b)
		return d >= -24 && d <= 24
	}
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, c.R) && near(pg, c.G) && near(pb, c.B) {
				n++
			}
		}
	}
	return n
}
