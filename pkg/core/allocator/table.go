package allocator

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	dcel "github.com/dractl/dractl/pkg/core/cel"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/pool"
)

// PoolTable is everything the allocator knows about one pool that follows
// from its ResourceSlices alone: per generation, the slices with their
// compiled node selection and, built on first use, the device table
// (devices with dense pool-local indices, counter sets, validity of the
// views nodes have of it) and the results of selectors, attributes and
// derived attributes per device. Nothing in it depends on allocations, so
// it stays valid until one of the pool's slices changes: an incremental
// cluster state keeps it across scheduling cycles and pairs it with what
// allocated claims hold (PoolState). It is safe for concurrent use.
type PoolTable struct {
	// only is the one node the pool's slices name when no slice selects
	// nodes otherwise, "" when there is no such node: what Filter asks
	// first (see localView), so it comes first.
	only string
	p    *pool.Pool
	g    gates
	// driver and pool name the pool in results without a visit to p.
	driver, pool string
	// gens are the pool's generations, newest first; gens[0] is p's
	// current generation. Older ones are kept because a node that sees
	// only them allocates from them (see poolView).
	gens []*genTable
	// nodes are the names of the nodes the pool's slices name (sorted,
	// unique); selects: some slice selects nodes otherwise (allNodes,
	// nodeSelector or perDeviceNodeSelection).
	nodes   []string
	selects bool
	// local is the view of the pool from the one node its slices name,
	// when no slice selects nodes otherwise (see localView).
	localOnce sync.Once
	local     struct {
		known, ok bool
		gi        int
		np        nodePool // without ps and h, which are per PoolState
	}
}

// NewPoolTable indexes the pool's slices. Its cost is linear in the
// number of slices; devices are not looked at until a node sees the pool.
// The tables an Allocator reads must be built with its Options.Features.
// p and its slices must not be modified afterwards.
func NewPoolTable(p *pool.Pool, f features.Set) *PoolTable {
	// This is where every allocator, and every reader of a State, gets its
	// pools: what Resolve leaves out is then left out for all of them.
	p = p.Resolve(f.Enabled(features.ResourceSliceMixins))
	pt := &PoolTable{p: p, g: newGates(f), driver: p.Driver, pool: p.Pool}
	gens := []*pool.Pool{p}
	if len(p.Older) > 0 {
		gens = p.Generations()
	}
	pt.gens = make([]*genTable, len(gens))
	for gi, gp := range gens {
		t := &genTable{pt: pt, p: gp, newer: gi > 0, slices: make([]sliceInfo, len(gp.Slices))}
		for k, s := range gp.Slices {
			sl := sliceInfo{s: s, perDevice: ptr.Deref(s.Spec.PerDeviceNodeSelection, false),
				perDeviceSet: s.Spec.PerDeviceNodeSelection != nil,
				counters:     len(s.Spec.SharedCounters) > 0, skipNodeOps: len(s.Spec.SkipNodeOperations) > 0, skip: s.Spec.SkipNodeOperations,
				pinned: s.Spec.NodeName != nil, devStart: t.nDevs}
			sl.node = newNodeSelection(s.Spec.NodeName, s.Spec.AllNodes, s.Spec.NodeSelector)
			t.nDevs += int32(len(s.Spec.Devices))
			sl.devEnd = t.nDevs
			switch {
			case sl.node.name != "":
				pt.nodes = append(pt.nodes, sl.node.name)
			case sl.node.set() || sl.perDevice:
				pt.selects = true
			}
			t.slices[k] = sl
			if len(s.Unread) > 0 {
				t.unread = true
			}
		}
		pt.gens[gi] = t
	}
	slices.Sort(pt.nodes)
	pt.nodes = slices.Compact(pt.nodes)
	if len(pt.nodes) == 1 && !pt.selects {
		pt.only = pt.nodes[0]
	}
	return pt
}

// Pool is the pool the table was built from, without what pool.Resolve
// left out.
func (pt *PoolTable) Pool() *pool.Pool { return pt.p }

// Nodes are the names of the nodes that slices of the pool name in
// spec.nodeName, sorted.
func (pt *PoolTable) Nodes() []string { return pt.nodes }

// SelectsNodes reports whether a slice of the pool selects nodes other
// than by name: allNodes, nodeSelector or perDeviceNodeSelection. Such a
// pool may be seen by any node.
func (pt *PoolTable) SelectsNodes() bool { return pt.selects }

// genTable is one generation of a pool. Device, counter and counter set
// indices are local to it.
//
// A table is shared by every Allocate call that reads the pool, across
// goroutines (the scheduler's parallel Filter) and across cycles while the
// pool's slices do not change, and it is built lazily because a cycle
// looks at a few devices of each pool. Each part is built at most once and
// never changed afterwards, so readers of a built part take no lock. What
// guards what, and why the guards stay apart:
//
//   - once guards the static part that buildStatic fills: dupNames
//     through badRange below, and the devs and ready arrays it sizes
//     (unread and the fields above it are set by NewPoolTable, before the
//     table is shared). Everything else hangs off it.
//   - fullOnce guards fullInvalid, the validity of the view that sees
//     every slice, which is what almost every node has; viewMu guards
//     views, the validity of each subset view. They are apart so that the
//     common case never takes a lock.
//   - ready[i] says devs[i] is built and is read without a lock; mu
//     serialises builders, which append to the shared uses arena. A
//     sync.Once per device would cost twelve times the memory of an
//     atomic.Bool on pools of ten thousand devices and still need mu for
//     the arena.
//   - allOnce guards the per-set device lists in sets (devices, shares)
//     that only BestFit scoring reads. It cannot be mu: building them
//     builds device entries, which takes mu.
//   - cache has its own lock for its column maps (cache.go); the columns
//     are arrays of atomics filled by whoever computes a cell first.
//
// The held part of a pool (heldGen) is not here: it changes with claims
// and lives in PoolState, behind its own once.
type genTable struct {
	pt *PoolTable
	p  *pool.Pool // this generation
	// newer: the pool has a newer generation.
	newer  bool
	slices []sliceInfo
	nDevs  int32

	// Built once, on first use (static).
	once sync.Once
	// dupNames: two devices of the generation share a name.
	dupNames bool
	// names are the devices sorted by name, for what allocated claims
	// hold; byName is the first of each name in names.
	names     []namedDev
	byName    map[string]int32
	setByName map[string]int32
	ctrByName map[string]map[string]int32
	sets      []setInfo
	capacity  []uint64 // per counter: what its set offers
	// bindingConds per slice: it offers devices with binding conditions.
	bindingConds []bool
	// usesCompat: some device of the pool declares compatibility groups;
	// without any, the group check always admits and is skipped.
	usesCompat bool
	// badRefs: some device's mixins or consumed counters do not resolve.
	badRefs bool
	// badRange: some counter, consumption or capacity is out of
	// api.QuantityInRange.
	badRange bool
	// unread: some slice holds spec fields its decoder dropped
	// (pool.Slice.Unread), which makes every view of it invalid.
	unread bool

	// Validity of the views nodes have of the generation (see poolView):
	// every slice, or a subset by key.
	fullOnce    sync.Once
	fullInvalid *pool.InvalidError
	viewMu      sync.Mutex
	views       map[string]*pool.InvalidError

	// devs are built on first use (dev); ready says which are.
	devs  []devInfo
	ready []atomic.Bool
	mu    sync.Mutex // serializes building entries
	uses  useArena   // the entries' counter uses (reuse.go)
	// allOnce builds the per-set device lists BestFit scoring reads.
	allOnce sync.Once

	cache resultCache
}

type namedDev struct {
	name string
	idx  int32
	// counters: the device consumes counters as written (mixins aside),
	// which is when holding it takes counters.
	counters bool
}

type sliceInfo struct {
	s         *pool.Slice
	node      nodeSelection
	perDevice bool
	// perDeviceSet: perDeviceNodeSelection is set at all, even to false;
	// upstream ignores such slices without DRAPartitionableDevices.
	perDeviceSet bool
	// counters: the slice defines shared counters, so upstream treats it
	// as a counter slice and never offers its devices.
	counters bool
	// skipNodeOps: the slice lists node operations its devices skip
	// (skip, as results copy it); pinned: it names its node.
	skipNodeOps bool
	skip        []resourcev1.SkipNodeOperation
	pinned      bool
	devStart    int32 // generation-local
	devEnd      int32
}

// nodeSelection is one of nodeName, allNodes or a compiled nodeSelector.
// It is kept small because a table makes one per slice.
type nodeSelection struct {
	name string
	all  bool
	sel  *compiledSelector
}

type compiledSelector struct {
	compiled *nodeaffinity.NodeSelector
	err      error
}

func newNodeSelection(name *string, all *bool, sel *corev1.NodeSelector) nodeSelection {
	ns := nodeSelection{name: ptr.Deref(name, ""), all: ptr.Deref(all, false)}
	if sel != nil {
		ns.sel = &compiledSelector{}
		if ns.name == "" && !ns.all {
			ns.sel.compiled, ns.sel.err = nodeaffinity.NewNodeSelector(sel)
		}
	}
	return ns
}

func (ns *nodeSelection) set() bool { return ns.name != "" || ns.all || ns.sel != nil }

// matches mirrors upstream NodeMatches: nodeName wins over allNodes, which
// wins over nodeSelector; nothing set matches nothing.
func (ns *nodeSelection) matches(node *corev1.Node) (bool, error) {
	switch {
	case ns.name != "":
		return node.Name == ns.name, nil
	case ns.all:
		return true, nil
	case ns.sel != nil:
		if ns.sel.err != nil {
			return false, fmt.Errorf("failed to parse node selector: %w", ns.sel.err)
		}
		return ns.sel.compiled.Match(node), nil
	}
	return false, nil
}

type counterUse struct {
	rel int32 // counter index relative to the generation's first counter
	amt uint64
}

type compatUse struct {
	set    int32 // generation-local counter set index
	groups []string
}

// devInfo is what does not change about a device while its slices do not.
// What allocated claims hold of it is in heldGen.
type devInfo struct {
	t       *genTable
	slice   int32 // index in t.slices
	idx     int32 // index in the generation's table
	d       *api.Device
	view    api.DeviceView
	viewErr error
	// attrErr: an attribute upstream cannot hand to CEL, which fails every
	// selector evaluated on the device (cel.CheckAttributes).
	attrErr error
	node    nodeSelection // only with perDeviceNodeSelection
	uses    []counterUse
	// bucket is the (generation-local) counter set of the first counter
	// the device consumes; bucketUses are its uses within that set. The
	// search bound groups devices by it.
	bucket     int32
	bucketUses []counterUse
	compat     []compatUse
	cap        map[api.QualifiedName]api.DeviceCapacity
	multi      bool
	// What every scan of the device reads, kept here so that passing over
	// a device does not touch its API object: it has binding conditions,
	// taints, consumes counters as written; alone is whether its
	// capacity holds a request without capacity requirements on the
	// unshared device (capacityFits, computed once; aloneErr its error).
	bindingConds, tainted, consumes bool
	alone                           bool
	aloneErr                        error
	// What a result copies from the device: its name, and whether it
	// sets binding conditions or binds to its node at all.
	name        string
	bindingSet  bool
	bindsToNode bool
}

func (d *devInfo) id() string {
	p := d.t.p
	return p.Driver + "/" + p.Pool + "/" + d.d.Name
}

func (d *devInfo) sliceInfo() *sliceInfo { return &d.t.slices[d.slice] }

type setInfo struct {
	name     string
	ctrStart int32 // generation-local index of its first counter
	names    []string
	milli    []bool
	devices  []int32 // devices consuming from the set, for BestFit scoring
	// shares are, per entry of devices, what the device takes of the set:
	// each counter's amount as a fraction of the set's, summed (BestFit's
	// measure of fill, bestfit.go).
	shares []float64
}

// static builds the device-level part of the table once.
func (t *genTable) static() *genTable {
	t.once.Do(t.buildStatic)
	return t
}

func (t *genTable) buildStatic() {
	p := t.p
	t.devs = make([]devInfo, t.nDevs)
	t.ready = make([]atomic.Bool, t.nDevs)
	t.bindingConds = make([]bool, len(p.Slices))
	t.setByName, t.ctrByName = map[string]int32{}, map[string]map[string]int32{}
	// Counter sets first so that device consumption can refer to them.
	sets := p.CounterSets()
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	slices.Sort(names)
	var ctrs []string
	for _, n := range names {
		cs := sets[n]
		si := setInfo{name: n, ctrStart: int32(len(t.capacity))}
		ctrs = ctrs[:0]
		for c := range cs.Counters() {
			ctrs = append(ctrs, c)
		}
		slices.Sort(ctrs)
		byCtr := make(map[string]int32, len(ctrs))
		si.names = slices.Clone(ctrs)
		si.milli = make([]bool, len(ctrs))
		for j, c := range ctrs {
			v, _ := cs.Counter(c)
			byCtr[c] = int32(len(t.capacity))
			if !api.CounterInRange(v.Value) {
				// The view's validation reports it; the pool is not used.
				t.badRange = true
			}
			// Milli units keep fractional counters exact; counters too large
			// for that (beyond ~1 PB of bytes) fall back to whole units.
			milli := api.CounterInRange(v.Value) && v.Value.CmpInt64(1<<50) < 0
			si.milli[j] = milli
			t.capacity = append(t.capacity, scaled(v.Value, milli))
		}
		t.setByName[n] = int32(len(t.sets))
		t.ctrByName[n] = byCtr
		t.sets = append(t.sets, si)
	}
	t.names = make([]namedDev, 0, t.nDevs)
	for k, s := range p.Slices {
		counters := t.slices[k].counters
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if d.BindingConditions != nil && !counters {
				t.bindingConds[k] = true
			}
			t.scanRefs(s, d)
			t.names = append(t.names, namedDev{name: d.Name, idx: int32(len(t.names)), counters: len(d.ConsumesCounters) > 0})
		}
	}
	// Stable: devices of one name stay in device order.
	slices.SortStableFunc(t.names, func(x, y namedDev) int { return strings.Compare(x.name, y.name) })
	t.byName = make(map[string]int32, len(t.names))
	for i := len(t.names) - 1; i >= 0; i-- {
		if i > 0 && t.names[i].name == t.names[i-1].name {
			t.dupNames = true
		}
		t.byName[t.names[i].name] = int32(i)
	}
}

// named returns the devices with that name, in device order.
func (t *genTable) named(name string) []namedDev {
	k, ok := t.byName[name]
	if !ok {
		return nil
	}
	i := int(k)
	j := i
	for j < len(t.names) && t.names[j].name == name {
		j++
	}
	return t.names[i:j]
}

// scanRefs is the part of building a device entry that the pool needs
// before any device is used: whether its mixins and consumed counters
// resolve (pool validity) and whether it declares compatibility groups. It
// allocates nothing, so seeing a pool costs little more than its size.
func (t *genTable) scanRefs(s *pool.Slice, d *api.Device) {
	for _, c := range d.Capacity {
		if !api.QuantityInRange(c.Value) {
			t.badRange = true
		}
	}
	for _, n := range d.Includes {
		m, ok := s.Mixins.DeviceMixin(n)
		if !ok {
			t.badRefs = true
			return
		}
		for _, c := range m.Capacity {
			if !api.QuantityInRange(c.Value) {
				t.badRange = true
			}
		}
	}
	for i := range d.ConsumesCounters {
		c := &d.ConsumesCounters[i]
		for _, n := range c.Includes {
			if _, ok := s.Mixins.ConsumptionMixin(n); !ok {
				t.badRefs = true
				return
			}
		}
		if len(c.CompatibilityGroups) > 0 {
			t.usesCompat = true
		}
		byCtr, ok := t.ctrByName[c.CounterSet]
		if !ok {
			t.badRefs = true
			return
		}
		for name, q := range c.Counters {
			if !api.CounterInRange(q.Value) {
				t.badRange = true
			}
			if _, ok := byCtr[name]; !ok {
				t.badRefs = true
				return
			}
		}
		for _, n := range c.Includes {
			m, _ := s.Mixins.ConsumptionMixin(n)
			for name, q := range m.Counters {
				if !api.CounterInRange(q.Value) {
					t.badRange = true
				}
				if _, ok := byCtr[name]; !ok {
					t.badRefs = true
					return
				}
			}
		}
	}
}

// suspect reports whether validating every slice of the generation could
// find a counter problem: counter sets that are duplicated or do not
// resolve, device mixins that do not resolve, and consumption of unknown
// counter sets or counters (scanRefs flags those). Duplicate device names
// are checked by the caller. Building field paths for every device costs
// more than the table; this way it is done only to describe a problem.
func (t *genTable) suspect() bool {
	if t.badRefs {
		return true
	}
	declared := 0
	for _, s := range t.p.Slices {
		declared += len(s.Spec.SharedCounters)
	}
	return declared != len(t.sets)
}

// dev returns device i, building its entry the first time: a scheduling
// cycle looks at a few devices of each pool, so entries for the rest would
// be wasted work.
func (t *genTable) dev(i int32) *devInfo {
	if !t.ready[i].Load() {
		t.build(i)
	}
	return &t.devs[i]
}

func (t *genTable) build(i int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ready[i].Load() {
		return
	}
	// Slices of a pool are few; find the device's slice by its range.
	k := int32(0)
	for t.slices[k].devEnd <= i {
		k++
	}
	sl := &t.slices[k]
	t.newDev(k, sl.s, &sl.s.Spec.Devices[i-sl.devStart], i)
	t.ready[i].Store(true)
}

// all builds every device entry and the per-set device lists, which only
// BestFit scoring reads.
func (t *genTable) all() {
	t.allOnce.Do(func() {
		for i := range t.devs {
			d := t.dev(int32(i))
			if d.viewErr != nil {
				continue
			}
			for _, cv := range d.view.Consumptions {
				if set, ok := t.setByName[cv.CounterSet()]; ok {
					si := &t.sets[set]
					si.devices = append(si.devices, d.idx)
					si.shares = append(si.shares, t.share(si, d))
				}
			}
		}
	})
}

// share is what d takes of set si: the fraction of each counter of the set
// it consumes, summed. Counters of zero capacity count for nothing.
func (t *genTable) share(si *setInfo, d *devInfo) float64 {
	var sh float64
	for _, u := range d.uses {
		if u.rel < si.ctrStart || u.rel >= si.ctrStart+int32(len(si.names)) {
			continue
		}
		if c := t.capacity[u.rel]; c > 0 {
			sh += float64(u.amt) / float64(c)
		}
	}
	return sh
}

// newDev fills entry i; t.mu is held. Counter uses live in one arena per
// generation and a device without mixins reads its own capacity map, so an
// entry usually costs no allocation of its own.
func (t *genTable) newDev(k int32, s *pool.Slice, d *api.Device, i int32) {
	dev := &t.devs[i]
	dev.t, dev.slice, dev.idx, dev.d, dev.bucket = t, k, i, d, -1
	dev.bindingConds, dev.tainted, dev.consumes = len(d.BindingConditions) > 0, len(d.Taints) > 0, len(d.ConsumesCounters) > 0
	dev.name, dev.bindsToNode = d.Name, ptr.Deref(d.BindsToNode, false)
	dev.bindingSet = d.BindingConditions != nil || d.BindingFailureConditions != nil
	// Without DRAConsumableCapacity every device is allocated whole.
	dev.multi = t.pt.g.consumable && ptr.Deref(d.AllowMultipleAllocations, false)
	dev.view, dev.viewErr = s.Mixins.Device(d)
	if ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
		dev.node = newNodeSelection(d.NodeName, d.AllNodes, d.NodeSelector)
	}
	if dev.viewErr != nil {
		return
	}
	dev.attrErr = dcel.CheckAttributes(dev.view)
	if len(dev.view.Mixins) == 0 {
		if len(d.Capacity) > 0 {
			dev.cap = d.Capacity
		}
	} else {
		for name, c := range dev.view.Capacities() {
			if dev.cap == nil {
				dev.cap = map[api.QualifiedName]api.DeviceCapacity{}
			}
			dev.cap[name] = c
		}
	}
	if dev.cap != nil && t.pt.g.consumable {
		dev.alone, dev.aloneErr = capacityFits(nil, dev.cap, nil, nil, capArith{frac: t.pt.g.fractional})
	}
	start := t.uses.mark()
	for _, cv := range dev.view.Consumptions {
		set, ok := t.setByName[cv.CounterSet()]
		if !ok {
			continue
		}
		if t.usesCompat {
			dev.compat = append(dev.compat, compatUse{set: set, groups: sortedUnique(cv.Consumption.CompatibilityGroups)})
		}
		for name, c := range cv.Counters() {
			rel, ok := t.ctrByName[cv.CounterSet()][name]
			if !ok {
				continue
			}
			milli := t.sets[set].milli[rel-t.sets[set].ctrStart]
			t.uses.add(counterUse{rel: rel, amt: scaled(c.Value, milli)})
		}
	}
	if dev.uses = t.uses.since(start); dev.uses == nil {
		return
	}
	// Deterministic order makes counter-exhaustion details stable.
	slices.SortFunc(dev.uses, func(x, y counterUse) int { return cmp.Compare(x.rel, y.rel) })
	if s := t.setOfCounter(dev.uses[0].rel); s >= 0 {
		si := &t.sets[s]
		dev.bucket = s
		// Uses are sorted by counter and a set's counters are contiguous,
		// so the bucket's uses are a run of them.
		lo, hi := -1, 0
		for j, u := range dev.uses {
			if u.rel >= si.ctrStart && u.rel < si.ctrStart+int32(len(si.names)) {
				if lo < 0 {
					lo = j
				}
				hi = j + 1
			}
		}
		if lo >= 0 {
			dev.bucketUses = dev.uses[lo:hi:hi]
		}
	}
}

// scaled is q in milli or whole units, rounded up. A quantity out of
// range (which makes its pool invalid) is 0 rather than computed, which
// could take minutes.
func scaled(q resource.Quantity, milli bool) uint64 {
	switch {
	case !api.CounterInRange(q):
		return 0
	case milli:
		return uint64(q.MilliValue())
	case q.CmpInt64(math.MaxInt64) <= 0:
		return uint64(q.Value())
	}
	// Between 2^63 and 2^64: exact on a copy (AsDec converts in place).
	c := q.DeepCopy()
	return new(inf.Dec).Round(c.AsDec(), 0, inf.RoundCeil).UnscaledBig().Uint64()
}

func sortedUnique(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// counterName names a generation-local counter as "<set>/<counter>".
func (t *genTable) counterName(rel int32) string {
	if s := t.setOfCounter(rel); s >= 0 {
		return t.sets[s].name + "/" + t.sets[s].names[rel-t.sets[s].ctrStart]
	}
	return "?"
}

// setOfCounter returns the set index of a generation-local counter.
func (t *genTable) setOfCounter(rel int32) int32 {
	for s := range t.sets {
		si := &t.sets[s]
		if rel >= si.ctrStart && rel < si.ctrStart+int32(len(si.names)) {
			return int32(s)
		}
	}
	return -1
}

func (d *devInfo) perDevice() bool { return d.node.set() }
