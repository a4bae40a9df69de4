package render

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/pkg/core/state"
)

// Options tune the pictures.
type Options struct {
	// Color draws held partitions on a background of their claim's colour
	// and blocked ones dimmed (ANSI escapes, for a terminal).
	Color bool
}

// column widths of the text grid, in runes
const (
	minColumn = 3
	maxColumn = 9
)

func itoa(n int) string { return strconv.Itoa(n) }

// Text writes a counter set as a text grid in the style of KEP-4815's
// memory-slice diagram, under a line with the set's counters.
func Text(w io.Writer, g Grid, opts Options) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", g.Set, CounterSummary(g))
	if len(g.Columns) == 0 {
		b.WriteString("  no device consumes this counter set\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	labelW := len([]rune(g.Corner))
	colW := minColumn
	for _, c := range g.Columns {
		colW = max(colW, len([]rune(c)))
	}
	// The width depends on the sizes only, not on who holds what, so that
	// the same set looks the same before and after an allocation.
	for _, r := range g.Rows {
		labelW = max(labelW, len([]rune(r.Label)))
		if slices.ContainsFunc(r.Cells, func(c Cell) bool { return c.Span == 1 }) {
			colW = max(colW, len([]rune(freeText(r.Label))))
		}
	}
	colW = min(colW, maxColumn)
	rule := "+" + strings.Repeat("-", labelW+2) + "+" + strings.Repeat(strings.Repeat("-", colW+2)+"+", len(g.Columns)) + "\n"
	b.WriteString(rule)
	b.WriteString("| " + pad(g.Corner, labelW) + " |")
	for _, c := range g.Columns {
		b.WriteString(" " + pad(fit(c, colW), colW) + " |")
	}
	b.WriteString("\n" + rule)
	for _, r := range g.Rows {
		b.WriteString("| " + pad(r.Label, labelW) + " |")
		col := 0
		for _, c := range r.Cells {
			for ; col < c.Start; col++ {
				b.WriteString(strings.Repeat(" ", colW+2) + "|")
			}
			inner := c.Span*(colW+3) - 1
			text := " " + pad(fit(cellText(c, r.Label), inner-2), inner-1)
			b.WriteString(paint(text, c, opts) + "|")
			col = c.Start + c.Span
		}
		for ; col < len(g.Columns); col++ {
			b.WriteString(strings.Repeat(" ", colW+2) + "|")
		}
		b.WriteString("\n" + rule)
	}
	for _, c := range g.Other {
		fmt.Fprintf(&b, "  also consumes from %s: %s %s\n", g.Set, c.Device, stateText(c))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func paint(text string, c Cell, opts Options) string {
	if !opts.Color {
		return text
	}
	switch c.State {
	case Held:
		return fmt.Sprintf("\x1b[30;48;5;%dm%s\x1b[0m", claimSwatch(c.Holders[0]).ansi, text)
	case Blocked:
		return "\x1b[2m" + text + "\x1b[0m"
	}
	return text
}

func stateText(c Cell) string {
	switch c.State {
	case Held:
		return "(held by " + holderText(c.Holders) + ")"
	case Blocked:
		return "(blocked)"
	}
	return "(free)"
}

// CounterSummary says how much of each counter is consumed: the column
// counters as one count ("memory-slice 3/8"), the others one by one.
// Counters without capacity are left out.
func CounterSummary(g Grid) string {
	var parts []string
	used, total := 0, 0
	for _, c := range g.Counters {
		if g.Family != "" && strings.HasPrefix(c.Name, g.Family) && isNumber(strings.TrimPrefix(c.Name, g.Family)) {
			total++
			if c.Consumed.Sign() > 0 {
				used++
			}
			continue
		}
		if c.Capacity.Sign() <= 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s/%s", c.Name, inUnitOf(c.Consumed, c.Capacity), c.Capacity.String()))
	}
	if total > 0 {
		parts = append([]string{fmt.Sprintf("%s %d/%d", g.Corner, used, total)}, parts...)
	}
	return strings.Join(parts, ", ")
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return s != "" && err == nil
}

// PoolText writes one pool: a header with its state, every counter set as
// a grid, and the devices that consume no counters with their holders.
func PoolText(w io.Writer, u *state.PoolUsage, opts Options) error {
	var b strings.Builder
	writePoolHeader(&b, u)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, g := range Grids(u) {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		if err := Text(w, g, opts); err != nil {
			return err
		}
	}
	b.Reset()
	plain := plainDevices(u)
	if len(plain) > 0 {
		fmt.Fprintf(&b, "\ndevices without counters:\n")
		for _, d := range plain {
			fmt.Fprintf(&b, "  %s %s\n", d.Device, stateText(d))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// PoolCounts are how many of a pool's devices are held, blocked and free.
type PoolCounts struct{ Devices, Held, Blocked, Free int }

// Count counts a pool's devices by state.
func Count(u *state.PoolUsage) PoolCounts {
	var n PoolCounts
	for i := range u.Devices {
		d := &u.Devices[i]
		n.Devices++
		switch {
		case len(d.Holders) > 0:
			n.Held++
		case d.Blocked:
			n.Blocked++
		default:
			n.Free++
		}
	}
	return n
}

func writePoolHeader(b *strings.Builder, u *state.PoolUsage) {
	n := Count(u)
	fmt.Fprintf(b, "Pool:     %s\n", u.ID)
	fmt.Fprintf(b, "Slices:   %d of %d, generation %d", len(u.Slices), u.SliceCount, u.Generation)
	if !u.Complete() {
		b.WriteString(" (incomplete: the scheduler skips this pool)")
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "Devices:  %d: %d held, %d blocked, %d free\n", n.Devices, n.Held, n.Blocked, n.Free)
	if u.Invalid != nil {
		fmt.Fprintf(b, "Invalid:  %s\n", u.Invalid.Error())
	}
	// What pool.Resolve left out is not in the pool the scheduler sees;
	// each is named so that none goes missing unnoticed.
	for i, p := range u.Dropped {
		label := "          "
		if i == 0 {
			label = "Left out: "
		}
		fmt.Fprintf(b, "%s%s\n", label, p)
	}
}

func plainDevices(u *state.PoolUsage) []Cell {
	var out []Cell
	for i := range u.Devices {
		d := &u.Devices[i]
		if d.ViewErr == nil && len(d.View.Consumptions) > 0 {
			continue
		}
		out = append(out, newCell(d, 0, 0))
	}
	return out
}

// inUnitOf writes q in the binary unit c is written in, so that 79.25Gi of
// 80Gi reads as such rather than as 81152Mi of 80Gi.
func inUnitOf(q, c resource.Quantity) string {
	if q.Sign() == 0 {
		return "0"
	}
	cs := c.String()
	for i, suffix := range []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"} {
		if !strings.HasSuffix(cs, suffix) {
			continue
		}
		unit := float64(int64(1) << (10 * (i + 1)))
		v := q.AsApproximateFloat64() / unit
		return strconv.FormatFloat(float64(int64(v*100+0.5))/100, 'f', -1, 64) + suffix
	}
	return q.String()
}
