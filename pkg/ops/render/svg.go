package render

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/dractl/dractl/pkg/core/state"
)

// SVG geometry, in pixels. Text is 11px monospace, about 6.6px a glyph.
const (
	svgCol    = 72
	svgRow    = 22
	svgGlyph  = 6.6
	svgLine   = 16 // a line of title text
	svgMargin = 8
)

// svgCanvas collects elements and grows its size to hold them.
type svgCanvas struct {
	b             strings.Builder
	width, height float64
}

func (c *svgCanvas) text(x, y float64, s, attrs string) {
	fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f"%s>%s</text>`+"\n", x, y, attrs, html.EscapeString(s))
	c.width = max(c.width, x+float64(len([]rune(s)))*svgGlyph)
	c.height = max(c.height, y+4)
}

func (c *svgCanvas) rect(x, y, w, h float64, fill, title string) {
	fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="%s" stroke-width="1">`, x, y, w, h, fill, lineColor)
	if title != "" {
		fmt.Fprintf(&c.b, `<title>%s</title>`, html.EscapeString(title))
	}
	c.b.WriteString("</rect>\n")
	c.width = max(c.width, x+w)
	c.height = max(c.height, y+h)
}

func (c *svgCanvas) writeTo(w io.Writer, class string) error {
	width, height := c.width+svgMargin, c.height+svgMargin
	_, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" class="%s" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="monospace" font-size="11">`+"\n%s</svg>\n",
		class, width, height, width, height, c.b.String())
	return err
}

// grid draws g with its top left corner at (x, y) and returns the y below it.
func (c *svgCanvas) grid(g Grid, x, y float64) float64 {
	c.text(x, y+12, g.Set+": "+CounterSummary(g), ` font-weight="bold"`)
	y += svgLine + 4
	if len(g.Columns) == 0 {
		c.text(x, y+12, "no device consumes this counter set", "")
		return y + svgLine
	}
	labelW := float64(len([]rune(g.Corner)))
	for _, r := range g.Rows {
		labelW = max(labelW, float64(len([]rune(r.Label))))
	}
	labelW = labelW*svgGlyph + 12
	c.rect(x, y, labelW, svgRow, "#eeeeee", "")
	c.text(x+6, y+15, g.Corner, "")
	for i, col := range g.Columns {
		cx := x + labelW + float64(i)*svgCol
		c.rect(cx, y, svgCol, svgRow, "#eeeeee", "")
		c.text(cx+6, y+15, fit(col, glyphs(svgCol)), "")
	}
	y += svgRow
	for _, r := range g.Rows {
		c.rect(x, y, labelW, svgRow, "#eeeeee", "")
		c.text(x+6, y+15, r.Label, "")
		covered := make([]bool, len(g.Columns))
		for _, cell := range r.Cells {
			cx := x + labelW + float64(cell.Start)*svgCol
			w := float64(cell.Span) * svgCol
			fill, attrs := freeFill, ` fill="#777777"`
			switch cell.State {
			case Held:
				fill, attrs = claimSwatch(cell.Holders[0]).hex, ""
			case Blocked:
				fill, attrs = blockedFill, ` fill="#555555"`
			}
			c.rect(cx, y, w, svgRow, fill, cell.Device+" "+stateText(cell))
			c.text(cx+6, y+15, fit(cellText(cell, r.Label), glyphs(w)), attrs)
			for i := cell.Start; i < cell.Start+cell.Span && i < len(covered); i++ {
				covered[i] = true
			}
		}
		for i, cov := range covered {
			if !cov {
				c.rect(x+labelW+float64(i)*svgCol, y, svgCol, svgRow, "#f7f7f7", "")
			}
		}
		y += svgRow
	}
	for _, cell := range g.Other {
		y += svgLine
		c.text(x, y, "also consumes from "+g.Set+": "+cell.Device+" "+stateText(cell), "")
	}
	return y + svgLine
}

// SVG writes one counter set as a standalone SVG picture.
func SVG(w io.Writer, g Grid, _ Options) error {
	var c svgCanvas
	c.grid(g, svgMargin, svgMargin)
	return c.writeTo(w, "occupancy")
}

// PoolSVG writes a pool as one SVG picture: a header, then every counter
// set as a grid, then the devices that consume no counters.
func PoolSVG(w io.Writer, u *state.PoolUsage, opts Options) error {
	return PoolsSVG(w, []*state.PoolUsage{u}, opts)
}

// PoolsSVG writes pools one below the other as one SVG picture.
func PoolsSVG(w io.Writer, us []*state.PoolUsage, _ Options) error {
	var c svgCanvas
	x, y := float64(svgMargin), float64(svgMargin)
	for _, u := range us {
		y = c.pool(u, x, y) + svgLine
	}
	return c.writeTo(w, "occupancy")
}

func (c *svgCanvas) pool(u *state.PoolUsage, x, y float64) float64 {
	var head strings.Builder
	writePoolHeader(&head, u)
	for _, line := range strings.Split(strings.TrimRight(head.String(), "\n"), "\n") {
		y += svgLine
		c.text(x, y, line, "")
	}
	y += svgLine / 2
	for _, g := range Grids(u) {
		y = c.grid(g, x, y) + svgLine/2
	}
	if plain := plainDevices(u); len(plain) > 0 {
		y += svgLine
		c.text(x, y, "devices without counters:", ` font-weight="bold"`)
		for _, d := range plain {
			y += svgLine
			c.text(x+12, y, d.Device+" "+stateText(d), "")
		}
	}
	return y
}

// glyphs is how many characters fit in a cell w pixels wide.
func glyphs(w float64) int { return int((w - 12) / svgGlyph) }
