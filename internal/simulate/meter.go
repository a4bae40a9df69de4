package simulate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/render"
)

// meter sums counters over the cluster by family. An island's sums are
// kept until its State changes, so a sample costs the islands that changed
// since the last one. Pools do not change during a run, only the claims
// holding their devices: what a sum needs of each pool (its devices'
// consumption, its counters) is read once from its state.PoolUsage, and a
// sum then walks the island's claims instead of building the pools' usage
// again. sumUsage in the tests is the same rule over state.PoolUsage.
type meter struct {
	families []CounterFamily
	index    map[string]int
	islands  []islandSums
	models   [][]poolModel // per island, its pools
	// held and inUse are scratch space of sum: per device of the pool,
	// whether a claim holds it, and whether one that is not an
	// admin-access one does (only then its counters count as consumed).
	held, inUse, usable []bool
	consumed            []float64
}

type islandSums struct {
	version                  uint64
	measured                 bool
	capacity, used, stranded []float64
}

// poolModel is what the meter reads of one pool.
type poolModel struct {
	id pool.ID
	// first is the first device of each name, as state.Usage finds the
	// device an allocation result names.
	first    map[string]int
	devices  []deviceModel
	counters []counterModel // every counter of every set, sets by name
}

type deviceModel struct {
	// resolved: the device's mixins resolve (otherwise it consumes
	// nothing and is never free).
	resolved bool
	// fits is false when the device names a counter the pool lacks or an
	// amount out of range: it can then never be allocated.
	fits bool
	uses []counterUse
}

// counterUse is an amount a device takes from one counter. Amounts and
// capacities are float64: counter values are whole numbers of bytes or
// units far below 2^53, where float64 is exact.
type counterUse struct {
	counter int
	amount  float64
}

type counterModel struct {
	family   int // -1: not a measured family
	capacity float64
	inRange  bool
}

func newMeter(w *world) *meter {
	m := &meter{index: map[string]int{}, islands: make([]islandSums, len(w.islands)), models: make([][]poolModel, len(w.islands))}
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
	for i, isl := range w.islands {
		snap := isl.st.Snapshot()
		for _, id := range isl.pools {
			if u := snap.Usage(id); u != nil {
				m.models[i] = append(m.models[i], m.model(u))
			}
		}
	}
	m.measure(w)
	for i := range m.families {
		for _, s := range m.islands {
			m.families[i].Capacity += s.capacity[i]
		}
	}
	return m
}

// model reads a pool's devices and counters from its usage.
func (m *meter) model(u *state.PoolUsage) poolModel {
	pm := poolModel{id: u.ID, first: map[string]int{}, devices: make([]deviceModel, len(u.Devices))}
	type key struct{ set, counter string }
	at := map[key]int{}
	for _, cs := range u.CounterSets {
		for _, c := range cs.Counters {
			family, ok := m.index[render.CounterFamily(c.Name)]
			if !ok {
				family = -1
			}
			at[key{cs.Name, c.Name}] = len(pm.counters)
			pm.counters = append(pm.counters, counterModel{family: family, capacity: c.Capacity.AsApproximateFloat64(), inRange: api.QuantityInRange(c.Capacity)})
		}
	}
	for i := range u.Devices {
		d := &u.Devices[i]
		if _, dup := pm.first[d.Device.Name]; !dup {
			pm.first[d.Device.Name] = i
		}
		if d.ViewErr != nil {
			continue
		}
		dm := deviceModel{resolved: true, fits: true}
		for _, cv := range d.View.Consumptions {
			for name, c := range cv.Counters() {
				k, ok := at[key{cv.CounterSet(), name}]
				if !ok || !api.QuantityInRange(c.Value) {
					dm.fits = false
					continue
				}
				if !pm.counters[k].inRange {
					dm.fits = false
				}
				dm.uses = append(dm.uses, counterUse{counter: k, amount: c.Value.AsApproximateFloat64()})
			}
		}
		pm.devices[i] = dm
	}
	return pm
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
			m.sum(s, m.models[i], snap)
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
// later, it stays unused until something is freed. A device is free when
// no claim holds it and every counter it consumes still has the amount it
// needs.
func (m *meter) sum(s *islandSums, models []poolModel, snap *state.Snapshot) {
	n := len(m.families)
	s.capacity, s.used, s.stranded = make([]float64, n), make([]float64, n), make([]float64, n)
	s.version, s.measured = snap.Version(), true
	claims := snap.Claims()
	for pi := range models {
		pm := &models[pi]
		held, inUse := resetBools(&m.held, len(pm.devices)), resetBools(&m.inUse, len(pm.devices))
		for _, cl := range claims {
			if cl.Status.Allocation == nil {
				continue
			}
			for _, r := range cl.Status.Allocation.Devices.Results {
				if r.Driver != pm.id.Driver || r.Pool != pm.id.Pool {
					continue
				}
				if i, ok := pm.first[r.Device]; ok {
					held[i] = true
					inUse[i] = inUse[i] || !ptr.Deref(r.AdminAccess, false)
				}
			}
		}
		consumed := m.consumed[:0]
		for range pm.counters {
			consumed = append(consumed, 0)
		}
		m.consumed = consumed
		for i, d := range pm.devices {
			if inUse[i] && d.resolved {
				for _, u := range d.uses {
					consumed[u.counter] += u.amount
				}
			}
		}
		// usable: a free device consumes the counter.
		usable := resetBools(&m.usable, len(pm.counters))
		for i, d := range pm.devices {
			if held[i] || !d.resolved || !d.fits || !fitsFree(d, pm, consumed) {
				continue
			}
			for _, u := range d.uses {
				if u.amount > 0 {
					usable[u.counter] = true
				}
			}
		}
		for k, c := range pm.counters {
			if c.family < 0 {
				continue
			}
			s.capacity[c.family] += c.capacity
			s.used[c.family] += consumed[k]
			if free := c.capacity - consumed[k]; free > 0 && !usable[k] {
				s.stranded[c.family] += free
			}
		}
	}
}

func fitsFree(d deviceModel, pm *poolModel, consumed []float64) bool {
	for _, u := range d.uses {
		if pm.counters[u.counter].capacity-consumed[u.counter] < u.amount {
			return false
		}
	}
	return true
}

// resetBools makes *b n false values, reusing its storage.
func resetBools(b *[]bool, n int) []bool {
	if cap(*b) < n {
		*b = make([]bool, n)
	}
	*b = (*b)[:n]
	clear(*b)
	return *b
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
