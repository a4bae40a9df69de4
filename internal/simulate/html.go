package simulate

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"

	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/render"
)

// HTMLOptions tune the HTML report.
type HTMLOptions struct {
	// MaxNodes bounds the nodes drawn in full at each moment; the others
	// are counted. Zero: 16.
	MaxNodes int
}

type htmlChart struct {
	Title string
	SVG   template.HTML
}

type htmlPicture struct {
	Node string
	SVG  template.HTML
}

type htmlMoment struct {
	Title    string
	Pictures []htmlPicture
	Omitted  int
}

type htmlStrategy struct {
	Name    string
	Charts  []htmlChart
	Moments []htmlMoment
}

type htmlPage struct {
	Summary    string
	Workload   string
	Comparison []htmlChart
	Strategies []htmlStrategy
}

// WriteHTML writes the report as one self-contained HTML page: the
// terminal summary, charts of running pods, utilisation and stranded
// capacity over time, and the occupancy picture of every node (up to
// MaxNodes) at the first failure and at the end, per strategy. It loads
// nothing: no scripts, fonts, styles or images from elsewhere.
func (r *Report) WriteHTML(w io.Writer, opts HTMLOptions) error {
	if opts.MaxNodes <= 0 {
		opts.MaxNodes = 16
	}
	var summary bytes.Buffer
	if err := r.WriteText(&summary); err != nil {
		return err
	}
	page := htmlPage{Summary: summary.String(), Workload: r.Workload}
	running := render.Chart{Title: "Running pods", XLabel: "time (s)", YLabel: "pods"}
	placed := render.Chart{Title: "Pods placed (cumulative)", XLabel: "time (s)", YLabel: "pods"}
	waiting := render.Chart{Title: "Waiting pods", XLabel: "time (s)", YLabel: "pods"}
	for _, res := range r.Results {
		var run, pl, wt render.Series
		run.Name, pl.Name, wt.Name = res.Strategy, res.Strategy, res.Strategy
		for _, s := range res.Samples {
			run.Points = append(run.Points, render.Point{X: s.Time, Y: float64(s.Running)})
			pl.Points = append(pl.Points, render.Point{X: s.Time, Y: float64(s.Placed)})
			wt.Points = append(wt.Points, render.Point{X: s.Time, Y: float64(s.Waiting)})
		}
		running.Series = append(running.Series, run)
		placed.Series = append(placed.Series, pl)
		waiting.Series = append(waiting.Series, wt)
	}
	page.Comparison = append(page.Comparison, waitHistogram(r.Results))
	for _, c := range []render.Chart{waiting, running, placed} {
		svg, err := chartSVG(c)
		if err != nil {
			return err
		}
		page.Comparison = append(page.Comparison, svg)
	}
	for _, res := range r.Results {
		st := htmlStrategy{Name: res.Strategy}
		charts := []render.Chart{
			familyChart(res, "Utilisation by counter, "+res.Strategy, func(s Sample) []float64 { return s.Utilisation }),
			familyChart(res, "Stranded capacity by counter, "+res.Strategy, func(s Sample) []float64 { return s.Stranded }),
		}
		if len(res.Repacks) > 0 {
			charts = append(charts, repackChart(res))
		}
		for _, c := range charts {
			svg, err := chartSVG(c)
			if err != nil {
				return err
			}
			st.Charts = append(st.Charts, svg)
		}
		if res.FirstFailureView != nil {
			m, err := moment(fmt.Sprintf("At the first failure (pod %s, arrival %s)", res.FirstFailure.Pod, thousands(res.FirstFailure.Arrival)), res.FirstFailureView, opts.MaxNodes)
			if err != nil {
				return err
			}
			st.Moments = append(st.Moments, m)
		}
		if res.EndView != nil {
			m, err := moment("At the end", res.EndView, opts.MaxNodes)
			if err != nil {
				return err
			}
			st.Moments = append(st.Moments, m)
		}
		page.Strategies = append(page.Strategies, st)
	}
	return pageTemplate.Execute(w, page)
}

// repackChart draws, over time, the waiting pods and those an offline
// repack would let in: the gap fragmentation costs.
func repackChart(res *Result) render.Chart {
	c := render.Chart{Title: "Offline repack, " + res.Strategy, XLabel: "time (s)", YLabel: "pods"}
	waiting, letIn := render.Series{Name: "waiting"}, render.Series{Name: "a repack lets in"}
	for _, rp := range res.Repacks {
		waiting.Points = append(waiting.Points, render.Point{X: rp.Time, Y: float64(rp.Waiting)})
		letIn.Points = append(letIn.Points, render.Point{X: rp.Time, Y: float64(rp.LetIn)})
	}
	c.Series = []render.Series{waiting, letIn}
	return c
}

// waitHistogram draws the wait distribution of every strategy as bars,
// one group per bucket of WaitBuckets, the pods never placed last.
func waitHistogram(results []*Result) htmlChart {
	const w, h, left, bottom, top = 640, 260, 56, 40, 28
	colors := render.SeriesColors()
	most := 1
	for _, res := range results {
		for _, n := range res.Wait.Histogram {
			most = max(most, n)
		}
	}
	var b bytes.Buffer
	title := "Pods by wait"
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h, title)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-family="sans-serif">%s</text>`, left, title)
	plotH := h - top - bottom
	group := float64(w-left-170) / float64(len(WaitBucketLabels))
	bar := group * 0.8 / float64(max(1, len(results)))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`, left, h-bottom, w-170, h-bottom)
	fmt.Fprintf(&b, `<text x="8" y="%d" font-size="11" font-family="sans-serif">%d</text>`, top+10, most)
	for k, label := range WaitBucketLabels {
		x0 := float64(left) + float64(k)*group
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" font-family="sans-serif" text-anchor="middle">%s</text>`, x0+group/2, h-bottom+16, template.HTMLEscapeString(label))
		for i, res := range results {
			n := 0
			if k < len(res.Wait.Histogram) {
				n = res.Wait.Histogram[k]
			}
			bh := float64(plotH) * float64(n) / float64(most)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %d</title></rect>`,
				x0+group*0.1+float64(i)*bar, float64(h-bottom)-bh, bar, bh, colors[i%len(colors)], template.HTMLEscapeString(res.Strategy), template.HTMLEscapeString(label), n)
		}
	}
	for i, res := range results {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="11" font-family="sans-serif">%s</text>`,
			w-150, top+i*16, colors[i%len(colors)], w-136, top+i*16+9, template.HTMLEscapeString(res.Strategy))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" font-family="sans-serif" text-anchor="middle">wait</text></svg>`, left+(w-left-170)/2, h-6)
	// The SVG is generated here, with every text escaped.
	return htmlChart{Title: title, SVG: template.HTML(b.String())} //nolint:gosec
}

func familyChart(res *Result, title string, pick func(Sample) []float64) render.Chart {
	c := render.Chart{Title: title, XLabel: "time (s)", YLabel: "share of capacity", Percent: true}
	for i, f := range res.Counters {
		s := render.Series{Name: f.Name}
		for _, smp := range res.Samples {
			s.Points = append(s.Points, render.Point{X: smp.Time, Y: pick(smp)[i]})
		}
		c.Series = append(c.Series, s)
	}
	return c
}

func chartSVG(c render.Chart) (htmlChart, error) {
	var b bytes.Buffer
	if err := render.LineChart(&b, c); err != nil {
		return htmlChart{}, err
	}
	// The SVG is generated here, with every text escaped.
	return htmlChart{Title: c.Title, SVG: template.HTML(b.String())}, nil //nolint:gosec
}

func moment(title string, v *View, maxNodes int) (htmlMoment, error) {
	m := htmlMoment{Title: title}
	for i, n := range v.Nodes() {
		if len(m.Pictures) == maxNodes {
			m.Omitted = len(v.Nodes()) - i
			break
		}
		us := v.NodePools(i)
		if len(us) == 0 {
			continue
		}
		var b bytes.Buffer
		if err := render.PoolsSVG(&b, us, render.Options{}); err != nil {
			return m, err
		}
		m.Pictures = append(m.Pictures, htmlPicture{Node: n.Name, SVG: template.HTML(b.String())}) //nolint:gosec
	}
	return m, nil
}

func defaultStateOptions() state.Options { return state.Options{} }

var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>dractl simulate: {{.Workload}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; }
.node { margin: 0.5em 0 1.5em 0; overflow-x: auto; }
details > summary { cursor: pointer; font-weight: bold; margin: 0.5em 0; }
</style>
</head>
<body>
<h1>dractl simulate</h1>
<p>Workload: {{.Workload}}</p>
<h2>Summary</h2>
<pre id="summary">{{.Summary}}</pre>
<h2>Strategies compared</h2>
<div class="charts">
{{range .Comparison}}<figure class="chart-figure">{{.SVG}}</figure>
{{end}}</div>
{{range .Strategies}}<section class="strategy" id="strategy-{{.Name}}">
<h2>{{.Name}}</h2>
<div class="charts">
{{range .Charts}}<figure class="chart-figure">{{.SVG}}</figure>
{{end}}</div>
{{range .Moments}}<details open class="moment">
<summary>{{.Title}}</summary>
{{range .Pictures}}<div class="node"><h3>node {{.Node}}</h3>{{.SVG}}</div>
{{end}}{{if .Omitted}}<p>{{.Omitted}} more nodes are not drawn (see --report-nodes).</p>{{end}}
</details>
{{end}}</section>
{{end}}</body>
</html>
`))

// WriteHTML writes the search as one self-contained page: the terminal
// summary and the nodes-needed curve (the p99 wait of every run against
// its node count, runs never placing 1 % of the pods drawn at the top),
// with the bound as a line of its own.
func (r *PlanReport) WriteHTML(w io.Writer) error {
	var summary bytes.Buffer
	if err := r.WriteText(&summary); err != nil {
		return err
	}
	svg, err := chartSVG(r.curve())
	if err != nil {
		return err
	}
	return planTemplate.Execute(w, struct {
		Summary, Workload string
		Chart             htmlChart
	}{summary.String(), r.Workload, svg})
}

// curve is the nodes-needed chart. A wait that is never is drawn at the
// chart's top: the largest finite wait or twice the bound.
func (r *PlanReport) curve() render.Chart {
	c := render.Chart{Title: "p99 wait by " + r.Template + " nodes", XLabel: "template nodes", YLabel: "p99 wait (min)"}
	top := 2 * r.MaxWait
	for _, p := range r.Plans {
		for _, pt := range p.Curve {
			if !pt.P99.Never {
				top = max(top, pt.P99.Seconds)
			}
		}
	}
	lo, hi := math.MaxInt, 0
	for _, p := range r.Plans {
		s := render.Series{Name: p.Strategy}
		for _, pt := range p.Curve {
			y := pt.P99.Seconds
			if pt.P99.Never {
				y = top
			}
			s.Points = append(s.Points, render.Point{X: float64(pt.Nodes), Y: y / 60})
			lo, hi = min(lo, pt.Nodes), max(hi, pt.Nodes)
		}
		c.Series = append(c.Series, s)
	}
	if hi >= lo {
		c.Series = append(c.Series, render.Series{Name: "bound", Points: []render.Point{{X: float64(lo), Y: r.MaxWait / 60}, {X: float64(hi), Y: r.MaxWait / 60}}})
	}
	return c
}

var planTemplate = template.Must(template.New("plan").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>dractl simulate --node-template: {{.Workload}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
figure { margin: 0; }
</style>
</head>
<body>
<h1>dractl simulate: nodes needed</h1>
<p>Workload: {{.Workload}}</p>
<h2>Summary</h2>
<pre id="summary">{{.Summary}}</pre>
<h2>Nodes-needed curve</h2>
<figure class="chart-figure">{{.Chart.SVG}}</figure>
</body>
</html>
`))
