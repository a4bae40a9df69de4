package render

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/state"
)

// maxUnitColumns bounds the columns of a counter set drawn by counter
// units: past it, a unit covers several of the smallest consumptions.
const maxUnitColumns = 32

// CellState is what a partition is, as KEP-4815's diagram shows it.
type CellState uint8

const (
	// Free: the partition can still be allocated.
	Free CellState = iota
	// Held: an allocation result names the device.
	Held
	// Blocked: nobody holds the device, but an overlapping partition took
	// counters it needs (the diagram's X).
	Blocked
)

// Grid is one counter set drawn as KEP-4815 draws a GPU's memory slices:
// one column per memory slice (more generally, per counter that every
// device consuming it takes whole, such as a host's chips), or, for a set
// without such counters, per unit of its most used counter; one row per
// partition size, each partition a cell across the columns it covers.
type Grid struct {
	Set string
	// Corner names what the columns are, e.g. "memory-slice" or
	// "memory/10Gi"; Columns label them, e.g. "0".."7".
	Corner  string
	Columns []string
	Rows    []Row
	// Counters are the set's counters with capacity and consumption.
	Counters []state.CounterUsage
	// Family is the prefix shared by the counters that are columns, empty
	// when the columns are units of one counter.
	Family string
	// Other are devices that consume from the set but cover no column,
	// such as a device drawing only multiprocessors from a set drawn by
	// memory slices.
	Other []Cell
}

// Row is one partition size. A size whose placements overlap (two 4-slice
// profiles both starting at slice 0) gets as many rows as it needs.
type Row struct {
	Label string
	Cells []Cell // by Start; cells of a row never overlap
}

// Cell is one device across the columns it covers.
type Cell struct {
	Start, Span int
	Device      string
	State       CellState
	Holders     []state.Holder
}

// consumer is one device that draws from the set being laid out.
type consumer struct {
	du      *state.DeviceUsage
	amounts map[string]resource.Quantity // non-zero only
}

// Grids lays out every counter set of the pool, by set name.
func Grids(u *state.PoolUsage) []Grid {
	out := make([]Grid, 0, len(u.CounterSets))
	for i := range u.CounterSets {
		out = append(out, layout(u, &u.CounterSets[i]))
	}
	return out
}

func layout(u *state.PoolUsage, cs *state.CounterSetUsage) Grid {
	g := Grid{Set: cs.Name, Counters: cs.Counters}
	var cons []consumer
	for i := range u.Devices {
		du := &u.Devices[i]
		if du.ViewErr != nil {
			continue
		}
		c := consumer{du: du, amounts: map[string]resource.Quantity{}}
		for _, cv := range du.View.Consumptions {
			if cv.CounterSet() != cs.Name {
				continue
			}
			for name, ctr := range cv.Counters() {
				if ctr.Value.Sign() == 0 {
					continue
				}
				q := c.amounts[name]
				q.Add(ctr.Value)
				c.amounts[name] = q
			}
		}
		if len(c.amounts) > 0 {
			cons = append(cons, c)
		}
	}
	if len(cons) == 0 {
		return g
	}
	var cover func(c consumer) []int
	var shapeOf func(c consumer) string
	if fam, members := positionalFamily(cs, cons); fam != "" {
		g.Family = fam
		g.Corner = strings.TrimRight(fam, "-_.")
		col := map[string]int{}
		for i, m := range members {
			col[m] = i
			g.Columns = append(g.Columns, strings.TrimPrefix(m, fam))
		}
		cover = func(c consumer) []int {
			var cols []int
			for name := range c.amounts {
				if i, ok := col[name]; ok {
					cols = append(cols, i)
				}
			}
			slices.Sort(cols)
			return cols
		}
		shapeOf = func(c consumer) string { return shape(c, func(n string) bool { _, ok := col[n]; return ok }) }
	} else {
		name, unit, n := unitColumns(cs, cons)
		g.Corner = name + "/" + unit.String()
		for i := range n {
			g.Columns = append(g.Columns, strconv.Itoa(i))
		}
		// Units are not places: partitions of one size are laid side by
		// side in device order, and a row wraps when it is full.
		next := map[string]int{}
		cover = func(c consumer) []int {
			q, ok := c.amounts[name]
			if !ok {
				return nil
			}
			w := min(n, ceilDiv(q, unit))
			key := shapeOf(c)
			start := next[key]
			if start+w > n {
				start = 0
			}
			next[key] = start + w
			cols := make([]int, w)
			for i := range cols {
				cols[i] = start + i
			}
			return cols
		}
		shapeOf = func(c consumer) string { return shape(c, func(string) bool { return false }) }
	}

	type group struct {
		key   string
		first int
		span  int
		share float64
		rows  []Row
		devs  []*state.DeviceUsage
	}
	var groups []*group
	byKey := map[string]*group{}
	for i, c := range cons {
		key := shapeOf(c)
		cols := cover(c)
		if len(cols) == 0 {
			g.Other = append(g.Other, newCell(c.du, 0, 0))
			continue
		}
		gr := byKey[key]
		if gr == nil {
			gr = &group{key: key, first: i, span: len(cols), share: share(cs, c)}
			byKey[key] = gr
			groups = append(groups, gr)
		}
		gr.devs = append(gr.devs, c.du)
		place(&gr.rows, segments(c.du, cols))
	}
	slices.SortStableFunc(groups, func(x, y *group) int {
		if x.span != y.span {
			return y.span - x.span
		}
		if x.share != y.share {
			return cmp.Compare(y.share, x.share)
		}
		return x.first - y.first
	})
	devs := make([][]*state.DeviceUsage, len(groups))
	for i, gr := range groups {
		devs[i] = gr.devs
	}
	labels := rowLabels(devs)
	for i, gr := range groups {
		for _, r := range gr.rows {
			r.Label = labels[i]
			slices.SortFunc(r.Cells, func(x, y Cell) int { return x.Start - y.Start })
			g.Rows = append(g.Rows, r)
		}
	}
	return g
}

// positionalFamily finds the counters that are places: a family of
// counters named alike up to a trailing number (memory-slice-0 ...
// memory-slice-7, tpus-node-1 ... tpus-node-6), each taken whole by every
// device that consumes it. The largest family wins. It returns the common
// prefix and the members in numeric order, or "" when there is none.
func positionalFamily(cs *state.CounterSetUsage, cons []consumer) (string, []string) {
	capacity := map[string]resource.Quantity{}
	for _, c := range cs.Counters {
		capacity[c.Name] = c.Capacity
	}
	whole := map[string]bool{}
	for _, c := range cons {
		for name, q := range c.amounts {
			cp, ok := capacity[name]
			ok = ok && cp.Sign() > 0 && q.Cmp(cp) == 0
			if prev, seen := whole[name]; seen {
				ok = ok && prev
			}
			whole[name] = ok
		}
	}
	families := map[string][]string{}
	for name, ok := range whole {
		if !ok {
			continue
		}
		stem := numberedStem(name)
		if stem == "" {
			continue
		}
		families[stem] = append(families[stem], name)
	}
	best := ""
	for stem, members := range families {
		if len(members) < 2 {
			continue
		}
		if best == "" || len(members) > len(families[best]) || len(members) == len(families[best]) && stem < best {
			best = stem
		}
	}
	if best == "" {
		return "", nil
	}
	members := families[best]
	slices.SortFunc(members, func(x, y string) int {
		a, _ := strconv.Atoi(strings.TrimPrefix(x, best))
		b, _ := strconv.Atoi(strings.TrimPrefix(y, best))
		return a - b
	})
	return best, members
}

// unitColumns picks the counter most devices consume and the unit that
// divides every consumption of it: a 40Gi set split into 10Gi partitions
// is four columns of 10Gi.
func unitColumns(cs *state.CounterSetUsage, cons []consumer) (string, resource.Quantity, int) {
	users := map[string]int{}
	for _, c := range cons {
		for name := range c.amounts {
			users[name]++
		}
	}
	name := ""
	for n, k := range users {
		if name == "" || k > users[name] || k == users[name] && n < name {
			name = n
		}
	}
	var capacity resource.Quantity
	for _, c := range cs.Counters {
		if c.Name == name {
			capacity = c.Capacity
		}
	}
	// Quantities differ in scale; the unit is found in milli-units.
	gcd := new(big.Int)
	for _, c := range cons {
		if q, ok := c.amounts[name]; ok {
			gcd.GCD(nil, nil, gcd, milli(q))
		}
	}
	if gcd.Sign() == 0 {
		gcd.SetInt64(1000)
	}
	unit := quantityFromMilli(gcd, capacity.Format)
	n := 1
	if capacity.Sign() > 0 {
		n = ceilDiv(capacity, unit)
	}
	if n > maxUnitColumns {
		perColumn := new(big.Int).Add(milli(capacity), big.NewInt(maxUnitColumns-1))
		perColumn.Quo(perColumn, big.NewInt(maxUnitColumns))
		unit = quantityFromMilli(perColumn, capacity.Format)
		n = ceilDiv(capacity, unit)
	}
	return name, unit, max(n, 1)
}

func milli(q resource.Quantity) *big.Int {
	d := q.AsDec()
	v := new(big.Int).Set(d.UnscaledBig())
	scale := int64(d.Scale()) // value = unscaled * 10^-scale
	shift := 3 - scale
	switch {
	case shift > 0:
		v.Mul(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(shift), nil))
	case shift < 0:
		v.Quo(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(-shift), nil))
	}
	return v
}

func quantityFromMilli(v *big.Int, format resource.Format) resource.Quantity {
	q := resource.NewMilliQuantity(v.Int64(), format)
	if v.IsInt64() && v.Int64()%1000 == 0 {
		q = resource.NewQuantity(v.Int64()/1000, format)
	}
	return *q
}

// ceilDiv is how many units q covers, at least one.
func ceilDiv(q, unit resource.Quantity) int {
	u := milli(unit)
	if u.Sign() <= 0 {
		return 1
	}
	n := new(big.Int).Add(milli(q), new(big.Int).Sub(u, big.NewInt(1)))
	n.Quo(n, u)
	if !n.IsInt64() || n.Int64() > maxUnitColumns {
		return maxUnitColumns
	}
	return max(int(n.Int64()), 1)
}

// shape is what makes two partitions the same size: the counters they
// consume, except the columns they cover.
func shape(c consumer, isColumn func(string) bool) string {
	var parts []string
	n := 0
	for name, q := range c.amounts {
		if isColumn(name) {
			n++
			continue
		}
		parts = append(parts, name+"="+q.String())
	}
	slices.Sort(parts)
	return fmt.Sprintf("%d|%s", n, strings.Join(parts, ","))
}

// share is the fraction of the set a partition takes, summed over the
// set's counters: larger partitions of the same width come first.
func share(cs *state.CounterSetUsage, c consumer) float64 {
	s := 0.0
	for _, ctr := range cs.Counters {
		q, ok := c.amounts[ctr.Name]
		if !ok || ctr.Capacity.Sign() <= 0 {
			continue
		}
		s += q.AsApproximateFloat64() / ctr.Capacity.AsApproximateFloat64()
	}
	return s
}

// segments splits the columns a device covers into contiguous cells.
func segments(du *state.DeviceUsage, cols []int) []Cell {
	var out []Cell
	for i := 0; i < len(cols); {
		j := i + 1
		for j < len(cols) && cols[j] == cols[j-1]+1 {
			j++
		}
		out = append(out, newCell(du, cols[i], j-i))
		i = j
	}
	return out
}

func newCell(du *state.DeviceUsage, start, span int) Cell {
	c := Cell{Start: start, Span: span, Device: du.Device.Name, Holders: du.Holders}
	switch {
	case len(du.Holders) > 0:
		c.State = Held
	case du.Blocked:
		c.State = Blocked
	}
	return c
}

// place puts a device's cells into the first row of its size where they
// overlap nothing.
func place(rows *[]Row, cells []Cell) {
	for i := range *rows {
		r := &(*rows)[i]
		if !slices.ContainsFunc(cells, func(c Cell) bool { return overlaps(r.Cells, c) }) {
			r.Cells = append(r.Cells, cells...)
			return
		}
	}
	*rows = append(*rows, Row{Cells: cells})
}

func overlaps(cells []Cell, c Cell) bool {
	return slices.ContainsFunc(cells, func(o Cell) bool { return o.Start < c.Start+c.Span && c.Start < o.Start+o.Span })
}

// rowLabels names each size by a string attribute that is the same on
// all of its devices and different between sizes (a MIG profile, a TPU
// topology); a size without one is named by its device, or by its
// devices' common name prefix.
func rowLabels(groups [][]*state.DeviceUsage) []string {
	constant := make([]map[string]string, len(groups))
	for i, devs := range groups {
		constant[i] = map[string]string{}
		for name, a := range devs[0].View.Attributes() {
			if a.StringValue != nil {
				constant[i][string(name)] = *a.StringValue
			}
		}
		for _, d := range devs[1:] {
			for name, v := range constant[i] {
				a, ok := d.View.Attribute(api.QualifiedName(name))
				if !ok || a.StringValue == nil || *a.StringValue != v {
					delete(constant[i], name)
				}
			}
		}
	}
	count := map[string]int{}
	values := map[string]map[string]bool{}
	for _, c := range constant {
		for name, v := range c {
			count[name]++
			if values[name] == nil {
				values[name] = map[string]bool{}
			}
			values[name][v] = true
		}
	}
	best := ""
	for name, n := range count {
		if len(values[name]) != n || n < 2 && len(groups) > 1 {
			continue
		}
		if best == "" || n > count[best] || n == count[best] && name < best {
			best = name
		}
	}
	out := make([]string, len(groups))
	for i, devs := range groups {
		if v, ok := constant[i][best]; ok && best != "" {
			out[i] = v
			continue
		}
		out[i] = commonName(devs)
	}
	return out
}

func commonName(devs []*state.DeviceUsage) string {
	if len(devs) == 1 {
		return devs[0].Device.Name
	}
	prefix := devs[0].Device.Name
	for _, d := range devs[1:] {
		n := 0
		for n < len(prefix) && n < len(d.Device.Name) && prefix[n] == d.Device.Name[n] {
			n++
		}
		prefix = prefix[:n]
	}
	return prefix + "*"
}

// numberedStem is what precedes a counter name's trailing number
// ("memory-slice-" of "memory-slice-3"), or "" when it has none.
func numberedStem(name string) string {
	stem := strings.TrimRightFunc(name, func(r rune) bool { return r >= '0' && r <= '9' })
	if stem == name {
		return ""
	}
	return stem
}

// CounterFamily names the family a counter belongs to: counters numbered
// alike ("memory-slice-0" ... "memory-slice-7") are one family,
// "memory-slice"; any other counter is a family of its own. Reports sum
// counters by family across counter sets.
func CounterFamily(name string) string {
	if f := strings.TrimRight(numberedStem(name), "-_."); f != "" {
		return f
	}
	return name
}
