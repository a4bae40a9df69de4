package render

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// Chart is a line chart: series of (x, y) points over shared axes.
type Chart struct {
	Title, XLabel, YLabel string
	// Percent: y values are fractions, drawn from 0 to 100 %.
	Percent bool
	Series  []Series
}

// Series is one line.
type Series struct {
	Name   string
	Points []Point
}

// Point is one (x, y) value.
type Point struct{ X, Y float64 }

// lineColors are the series colours, dark enough for thin lines.
var lineColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// chart geometry, in pixels
const (
	chartW, chartH         = 640, 260
	plotL, plotR           = 56, 150 // room for y ticks on the left, the legend on the right
	plotT, plotB           = 28, 40
	chartTicks             = 5
	chartLegendLineSpacing = 16
)

// SeriesColors are the colours of a chart's lines, in series order, as
// #rrggbb.
func SeriesColors() []string { return append([]string(nil), lineColors...) }

// LineChart writes c as a standalone SVG picture.
func LineChart(w io.Writer, c Chart) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="16" font-weight="bold" font-size="13">%s</text>`+"\n", plotL, html.EscapeString(c.Title))
	xMax, yMax := 0.0, 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			xMax, yMax = max(xMax, p.X), max(yMax, p.Y)
		}
	}
	if c.Percent {
		yMax = 1
	}
	xMax, yMax = niceCeil(xMax), niceCeil(yMax)
	pw, ph := float64(chartW-plotL-plotR), float64(chartH-plotT-plotB)
	x := func(v float64) float64 { return plotL + v/xMax*pw }
	y := func(v float64) float64 { return plotT + ph - v/yMax*ph }
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="#ffffff" stroke="#999999"/>`+"\n", plotL, plotT, pw, ph)
	for i := 0; i <= chartTicks; i++ {
		yv := yMax * float64(i) / chartTicks
		xv := xMax * float64(i) / chartTicks
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eeeeee"/>`+"\n", plotL, plotL+pw, y(yv), y(yv))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotL-4, y(yv)+4, tick(yv, c.Percent))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(xv), plotT+ph+14, tick(xv, false))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", plotL+pw/2, chartH-8, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text x="12" y="%.1f" text-anchor="middle" transform="rotate(-90 12 %.1f)">%s</text>`+"\n", plotT+ph/2, plotT+ph/2, html.EscapeString(c.YLabel))
	for i, s := range c.Series {
		color := lineColors[i%len(lineColors)]
		if len(s.Points) > 0 {
			var pts strings.Builder
			for _, p := range s.Points {
				fmt.Fprintf(&pts, "%.1f,%.1f ", x(p.X), y(p.Y))
			}
			fmt.Fprintf(&b, `<polyline class="series" fill="none" stroke="%s" stroke-width="1.5" points="%s"><title>%s</title></polyline>`+"\n", color, strings.TrimSpace(pts.String()), html.EscapeString(s.Name))
		}
		ly := plotT + 8 + i*chartLegendLineSpacing
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", chartW-plotR+10, chartW-plotR+26, ly, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", chartW-plotR+30, ly+4, html.EscapeString(fit(s.Name, 18)))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so that ticks
// at fifths of it are round numbers.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64, percent bool) string {
	if percent {
		return strconv.FormatFloat(v*100, 'f', -1, 64) + "%"
	}
	if v >= 1e6 {
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	}
	if v >= 1e4 {
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}
