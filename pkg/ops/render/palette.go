package render

import (
	"hash/fnv"
	"strings"

	"github.com/dractl/dractl/pkg/core/state"
)

// swatch is one claim colour, in SVG and as the nearest ANSI 256-colour
// background, so that a claim has the same colour on a terminal and in a
// report. Light colours keep black text readable on both.
type swatch struct {
	hex  string
	ansi int
}

var palette = []swatch{
	{"#8dd3c7", 116}, {"#ffffb3", 229}, {"#bebada", 147}, {"#fb8072", 210},
	{"#80b1d3", 110}, {"#fdb462", 215}, {"#b3de69", 149}, {"#fccde5", 225},
	{"#bc80bd", 139}, {"#ccebc5", 194}, {"#ffed6f", 227},
}

// ClaimColors are the colours claims are drawn in, as #rrggbb.
func ClaimColors() []string {
	out := make([]string, len(palette))
	for i, s := range palette {
		out[i] = s.hex
	}
	return out
}

const (
	blockedFill = "#d9d9d9"
	freeFill    = "#ffffff"
	lineColor   = "#555555"
)

// claimSwatch gives every claim a stable colour from its key.
func claimSwatch(h state.Holder) swatch {
	f := fnv.New32a()
	f.Write([]byte(h.Claim.String()))
	return palette[f.Sum32()%uint32(len(palette))]
}

// holderText names what holds a partition: the claim (without the default
// namespace), and how many more share it.
func holderText(hs []state.Holder) string {
	if len(hs) == 0 {
		return ""
	}
	s := claimName(hs[0])
	if len(hs) > 1 {
		s += "+" + itoa(len(hs)-1)
	}
	return s
}

func claimName(h state.Holder) string {
	if h.Claim.Namespace == "" || h.Claim.Namespace == "default" {
		return h.Claim.Name
	}
	return h.Claim.Namespace + "/" + h.Claim.Name
}

// cellText is what a cell shows: the claim that holds it, X when it is
// blocked (as in KEP-4815's diagram), else the size it offers.
func cellText(c Cell, label string) string {
	switch c.State {
	case Held:
		return holderText(c.Holders)
	case Blocked:
		return "X"
	}
	return freeText(label)
}

// freeText is what a free partition shows: its size, as KEP-4815's diagram
// does, unless the size has no name of its own (a pattern of device names).
func freeText(label string) string {
	if strings.HasSuffix(label, "*") {
		return "free"
	}
	return label
}

// fit shortens s to n runes, marking the cut.
func fit(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return string(r[:max(n, 0)])
	}
	return string(r[:n-1]) + "…"
}

func pad(s string, n int) string {
	k := len([]rune(s))
	if k >= n {
		return s
	}
	return s + strings.Repeat(" ", n-k)
}
