package pool

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Warning is something a pool is allowed to do but should not.
type Warning struct {
	Slice   string
	Field   string // below the slice, as in field.Error
	Message string
}

func (w Warning) String() string {
	return fmt.Sprintf("ResourceSlice %s: %s: %s", w.Slice, w.Field, w.Message)
}

// OrderWarnings reports devices listed before a smaller device that
// consumes from the same counter set. The allocator takes the first device
// that fits, in the pool's order (slices by name, devices as listed), so a
// larger partition listed first is handed out to requests a smaller one
// would satisfy, and uses up what the smaller ones share (KEP-4815
// recommends smallest-to-largest order). One device is larger than another
// when it consumes at least as much of every counter the other consumes,
// and more of one of them or of another counter: devices that merely
// overlap, such as partitions in different places of one GPU, are not
// ordered by size, and are never reported. Each device is reported once,
// with the first smaller device after it.
func (p *Pool) OrderWarnings() []Warning {
	type setCounter struct{ set, counter string }
	type entry struct {
		slice *Slice
		index int
		name  string
		uses  map[setCounter]resource.Quantity
	}
	var all []entry
	bySet := map[string][]int{}
	for _, s := range p.Slices {
		views := s.Mixins.Views(s.Spec.Devices)
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			dv, err := views.Device(d)
			if err != nil || len(dv.Consumptions) == 0 {
				continue
			}
			e := entry{slice: s, index: i, name: d.Name, uses: map[setCounter]resource.Quantity{}}
			for _, c := range dv.Consumptions {
				for name, q := range c.Counters() {
					if q.Value.Sign() > 0 {
						e.uses[setCounter{c.CounterSet(), name}] = q.Value
					}
				}
			}
			if len(e.uses) == 0 {
				continue
			}
			for _, c := range dv.Consumptions {
				if l := bySet[c.CounterSet()]; len(l) == 0 || l[len(l)-1] != len(all) {
					bySet[c.CounterSet()] = append(l, len(all))
				}
			}
			all = append(all, e)
		}
	}
	// larger reports whether a takes all b takes and more.
	larger := func(a, b *entry) bool {
		more := len(a.uses) > len(b.uses)
		for k, qb := range b.uses {
			qa, ok := a.uses[k]
			if !ok {
				return false
			}
			switch qa.Cmp(qb) {
			case -1:
				return false
			case 1:
				more = true
			}
		}
		return more
	}
	type found struct {
		larger, smaller int
		set             string
	}
	var out []found
	reported := map[int]bool{}
	sets := make([]string, 0, len(bySet))
	for s := range bySet {
		sets = append(sets, s)
	}
	slices.Sort(sets)
	for _, set := range sets {
		l := bySet[set]
		for x, i := range l {
			if reported[i] {
				continue
			}
			for _, j := range l[x+1:] {
				if larger(&all[i], &all[j]) {
					reported[i] = true
					out = append(out, found{i, j, set})
					break
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b found) int { return a.larger - b.larger })
	ws := make([]Warning, len(out))
	for k, f := range out {
		a, b := &all[f.larger], &all[f.smaller]
		where := ""
		if b.slice != a.slice {
			where = fmt.Sprintf(" (ResourceSlice %s)", b.slice.Name)
		}
		ws[k] = Warning{
			Slice: a.slice.Name,
			Field: field.NewPath("spec", "devices").Index(a.index).String(),
			Message: fmt.Sprintf("device %s is listed before %s%s, which consumes less from counter set %s: the scheduler takes the first device that fits, so %s is handed out where %s would do; list %s first (KEP-4815: smallest to largest)",
				a.name, b.name, where, f.set, a.name, b.name, b.name),
		}
	}
	return ws
}
