package simulate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/dractl/dractl/pkg/render"
	"github.com/dractl/dractl/pkg/state"
)

// meter sums counters over the cluster by family. An island's sums are
// kept until its State changes, so a sample costs the islands that changed
// since the last one.
type meter struct {
	families []CounterFamily
	index    map[string]int
	islands  []islandSums
}

type islandSums struct {
	version                  uint64
	measured                 bool
	capacity, used, stranded []float64
}

func newMeter(w *world) *meter {
	m := &meter{index: map[string]int{}, islands: make([]islandSums, len(w.islands))}
	names := map[string]bool{}
	w.usages(func(u *state.PoolUsage) {
		for _, cs := range u.CounterSets {
			for _, c := range cs.Counters {
				if c.Capacity.Sign() > 0 {
					names[render.CounterFamily(c.Name)] = true
				}
			}
		}
	})
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	for i, n := range sorted {
		m.index[n] = i
		m.families = append(m.families, CounterFamily{Name: n})
	}
	m.measure(w)
	for i := range m.families {
		for _, s := range m.islands {
			m.families[i].Capacity += s.capacity[i]
		}
	}
	return m
}

// measure returns, per family, the used and the stranded fraction of the
// capacity.
func (m *meter) measure(w *world) (util, stranded []float64) {
	n := len(m.families)
	capacity, used, str := make([]float64, n), make([]float64, n), make([]float64, n)
	for i, isl := range w.islands {
		s := &m.islands[i]
		snap := isl.st.Snapshot()
		if !s.measured || s.version != snap.Version() {
			m.sum(s, isl, snap)
		}
		for k := range n {
			capacity[k] += s.capacity[k]
			used[k] += s.used[k]
			str[k] += s.stranded[k]
		}
	}
	util, stranded = make([]float64, n), make([]float64, n)
	for k := range n {
		if capacity[k] > 0 {
			util[k] = used[k] / capacity[k]
			stranded[k] = str[k] / capacity[k]
		}
	}
	return util, stranded
}

// sum adds up one island. A counter's free amount is stranded when no
// free device of its set consumes that counter: whatever is asked for
// later, it stays unused until something is freed.
func (m *meter) sum(s *islandSums, isl *island, snap *state.Snapshot) {
	n := len(m.families)
	s.capacity, s.used, s.stranded = make([]float64, n), make([]float64, n), make([]float64, n)
	s.version, s.measured = snap.Version(), true
	for _, id := range isl.pools {
		u := snap.Usage(id)
		if u == nil {
			continue
		}
		usable := map[string]map[string]bool{}
		for i := range u.Devices {
			d := &u.Devices[i]
			if d.ViewErr != nil || len(d.Holders) > 0 || d.Blocked {
				continue
			}
			for _, cv := range d.View.Consumptions {
				set := usable[cv.CounterSet()]
				if set == nil {
					set = map[string]bool{}
					usable[cv.CounterSet()] = set
				}
				for name, c := range cv.Counters() {
					if c.Value.Sign() > 0 {
						set[name] = true
					}
				}
			}
		}
		for _, cs := range u.CounterSets {
			for _, c := range cs.Counters {
				k, ok := m.index[render.CounterFamily(c.Name)]
				if !ok {
					continue
				}
				capacity, consumed := c.Capacity.AsApproximateFloat64(), c.Consumed.AsApproximateFloat64()
				s.capacity[k] += capacity
				s.used[k] += consumed
				if free := capacity - consumed; free > 0 && !usable[cs.Name][c.Name] {
					s.stranded[k] += free
				}
			}
		}
	}
}

// View is the cluster at one moment of a run: immutable snapshots of every
// island, from which pictures are drawn.
type View struct {
	w     *world
	snaps []*state.Snapshot
}

func (r *run) view() *View {
	v := &View{w: r.w, snaps: make([]*state.Snapshot, len(r.w.islands))}
	for i, isl := range r.w.islands {
		v.snaps[i] = isl.st.Snapshot()
	}
	return v
}

// Nodes are the nodes of the cluster, in order.
func (v *View) Nodes() []*corev1.Node { return v.w.c.Nodes }

// NodePools returns the usage of the pools node i sees.
func (v *View) NodePools(i int) []*state.PoolUsage {
	ii := v.w.nodeIsland[i]
	if ii < 0 {
		return nil
	}
	snap := v.snaps[ii]
	ids, err := snap.NodePools(v.w.c.Nodes[i])
	if err != nil {
		return nil
	}
	out := make([]*state.PoolUsage, 0, len(ids))
	for _, id := range ids {
		if u := snap.Usage(id); u != nil {
			out = append(out, u)
		}
	}
	return out
}
