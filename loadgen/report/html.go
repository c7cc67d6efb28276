package report

import (
	_ "embed"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
)

//go:embed report.html.tmpl
var htmlSource string

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"us":   FormatUS,
	"rate": FormatRate,
	"pct":  func(v float64) string { return strconv.FormatFloat(100*v, 'f', 2, 64) + "%" },
	"join": strings.Join,
	"actual": func(a Assertion) string {
		return formatActual(a)
	},
}).Parse(htmlSource))

// Chart geometry (SVG user units).
const (
	chartW, chartH                 = 760, 300
	padL, padR, padTop, padBot     = 70, 40, 20, 44
	plotX0, plotX1, plotY0, plotY1 = padL, chartW - padR, chartH - padBot, padTop
)

type chartView struct {
	ID, Title, XLabel, YLabel string
	W, H                      int
	X0, X1, Y0, Y1            int // plot area: X0 left, X1 right, Y0 bottom, Y1 top
	LegendX, LegendTextX      int
	XTicks, YTicks            []tickView
	Lines                     []lineView
	Empty                     bool
}

type tickView struct {
	Pos   float64
	Label string
}

type lineView struct {
	Name, Color, Dash, Points string
	LegendY                   int
}

// line is a series to plot in data coordinates.
type line struct {
	name, color, dash string
	x, y              []float64
}

// WriteHTML writes a self-contained page (inline SVG and CSS, a few lines of inline
// script, nothing fetched from the network) with the latency percentile distribution,
// throughput over time and latency over time.
func (r *Report) WriteHTML(w io.Writer) error {
	return htmlTemplate.Execute(w, struct {
		R      *Report
		Charts []chartView
	}{r, r.charts()})
}

// WriteHTMLFile writes the HTML report to path.
func (r *Report) WriteHTMLFile(path string) error { return writeFile(path, r.WriteHTML) }

func (r *Report) charts() []chartView {
	return []chartView{r.distributionChart(), r.throughputChart(), r.latencyChart()}
}

// nines maps a percentile to the x position of the classic HdrHistogram plot:
// log10(1/(1-p)), so that 90, 99, 99.9, ... are evenly spaced.
func nines(p float64) float64 {
	if p >= 99.999 {
		return 5
	}
	return math.Log10(100 / (100 - p))
}

func (r *Report) distributionChart() chartView {
	var c, u line
	c = line{name: "corrected (from intended send)", color: "#d62728"}
	u = line{name: "uncorrected (from actual send)", color: "#1f77b4", dash: "6 4"}
	for _, p := range r.Distribution {
		if p.Percentile >= 100 {
			continue
		}
		x := nines(p.Percentile)
		c.x, c.y = append(c.x, x), append(c.y, p.Corrected)
		u.x, u.y = append(u.x, x), append(u.y, p.Uncorrected)
	}
	xt := []tickView{{0, "0%"}, {1, "90%"}, {2, "99%"}, {3, "99.9%"}, {4, "99.99%"}, {5, "99.999%"}}
	return buildChart("chart-latency-distribution", "Latency by percentile", "percentile", "latency",
		[]line{c, u}, xt, 0, 5, FormatUS)
}

func (r *Report) throughputChart() chartView {
	ok := line{name: "completed / s", color: "#2ca02c"}
	errs := line{name: "errors / s", color: "#d62728"}
	for _, s := range r.Series {
		ok.x, ok.y = append(ok.x, s.T), append(ok.y, s.RPS)
		errs.x, errs.y = append(errs.x, s.T), append(errs.y, s.RPS*float64(s.Errors)/math.Max(1, float64(s.Done)))
	}
	return buildChart("chart-throughput", "Throughput over time", "seconds", "per second",
		[]line{ok, errs}, nil, 0, r.seriesEnd(), func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) })
}

func (r *Report) latencyChart() chartView {
	p50 := line{name: "p50", color: "#1f77b4"}
	p99 := line{name: "p99", color: "#ff7f0e"}
	mx := line{name: "max", color: "#d62728", dash: "4 3"}
	for _, s := range r.Series {
		if s.Done-s.Errors <= 0 {
			continue
		}
		p50.x, p50.y = append(p50.x, s.T), append(p50.y, s.P50)
		p99.x, p99.y = append(p99.x, s.T), append(p99.y, s.P99)
		mx.x, mx.y = append(mx.x, s.T), append(mx.y, s.Max)
	}
	return buildChart("chart-latency-time", "Latency over time (corrected)", "seconds", "latency",
		[]line{p50, p99, mx}, nil, 0, r.seriesEnd(), FormatUS)
}

func (r *Report) seriesEnd() float64 {
	end := r.DurationS
	if n := len(r.Series); n > 0 && r.Series[n-1].T > end {
		end = r.Series[n-1].T
	}
	if end <= 0 {
		end = 1
	}
	return end
}

// buildChart lays out lines in the plot area. xTicks nil means computed ticks.
func buildChart(id, title, xLabel, yLabel string, lines []line, xTicks []tickView, xMin, xMax float64, yFmt func(float64) string) chartView {
	cv := chartView{ID: id, Title: title, XLabel: xLabel, YLabel: yLabel, W: chartW, H: chartH,
		X0: plotX0, X1: plotX1, Y0: plotY0, Y1: plotY1, LegendX: plotX0 + 16, LegendTextX: plotX0 + 38}
	yMax := 0.0
	points := 0
	for _, l := range lines {
		for _, v := range l.y {
			yMax = math.Max(yMax, v)
		}
		points += len(l.x)
	}
	if points == 0 {
		cv.Empty = true
	}
	yTop, yStep := niceScale(yMax)
	if xMax <= xMin {
		xMax = xMin + 1
	}
	sx := func(x float64) float64 { return plotX0 + (x-xMin)/(xMax-xMin)*(plotX1-plotX0) }
	sy := func(y float64) float64 { return plotY0 - y/yTop*(plotY0-plotY1) }
	for v := 0.0; v <= yTop*1.0001; v += yStep {
		cv.YTicks = append(cv.YTicks, tickView{Pos: round1(sy(v)), Label: yFmt(v)})
	}
	if xTicks == nil {
		_, step := niceScale(xMax - xMin)
		for v := xMin; v <= xMax*1.0001; v += step {
			xTicks = append(xTicks, tickView{Pos: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
	}
	for _, t := range xTicks {
		cv.XTicks = append(cv.XTicks, tickView{Pos: round1(sx(t.Pos)), Label: t.Label})
	}
	for i, l := range lines {
		var b strings.Builder
		for j := range l.x {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.FormatFloat(round1(sx(l.x[j])), 'f', -1, 64))
			b.WriteByte(',')
			b.WriteString(strconv.FormatFloat(round1(sy(l.y[j])), 'f', -1, 64))
		}
		cv.Lines = append(cv.Lines, lineView{Name: l.name, Color: l.color, Dash: l.dash, Points: b.String(), LegendY: plotY1 + 14 + 16*i})
	}
	return cv
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// niceScale returns an axis top and tick step (1, 2 or 5 times a power of ten) that
// cover max in about five ticks.
func niceScale(max float64) (top, step float64) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return 1, 0.2
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f <= 1:
		step = mag
	case f <= 2:
		step = 2 * mag
	case f <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	return math.Ceil(max/step) * step, step
}
