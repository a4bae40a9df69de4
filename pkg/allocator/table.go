package allocator

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/api"
	dcel "github.com/dractl/dractl/pkg/cel"
	"github.com/dractl/dractl/pkg/pool"
)

// Allocator holds the warm state for one cluster state. It is safe for
// concurrent use. New only indexes slices by node; a pool's device table
// (devices, counters, validation, what allocated claims hold) is built the
// first time a node sees the pool, so neither New nor Allocate does work
// for pools the node cannot see. Everything filled lazily is filled once
// (sync.Once) or with values every goroutine computes the same.
type Allocator struct {
	opts    Options
	g       gates
	pools   []poolInfo
	slices  []sliceInfo
	classes map[string]*resourcev1.DeviceClass
	// byNode are the slices that name a node, by node name. The first
	// Allocate scans all slices instead: building the index costs more
	// than one scan, and a scheduler that rebuilds the Allocator per cycle
	// may ask for one node only.
	byNode    map[string][]int32
	nodeOnce  sync.Once
	nodeCalls atomic.Int32
	// shared are the slices that name no node but may still select one:
	// allNodes, nodeSelector or perDeviceNodeSelection.
	shared []int32
	// held are the results of allocated claims by pool, applied when the
	// pool's table is built.
	held    map[pool.ID][]*resourcev1.DeviceRequestAllocationResult
	sel     *selectorCache
	attrs   *attrCache
	derived derivedCache
	// seq is the Allocator's sequence number in opts.Cache, if any.
	seq uint64
	// nodes, probeNodes: search work of every Allocate call (Stats).
	nodes      atomic.Int64
	probeNodes atomic.Int64
}

// poolInfo is one generation of a pool. Older generations are kept because
// a node that sees only them allocates from them (see poolView).
type poolInfo struct {
	p *pool.Pool
	// newer: the pool has a newer generation.
	newer bool
	// firstSlice is the index in Allocator.slices of the pool's first
	// slice; the pool's slices are contiguous there.
	firstSlice int32
	nDevs      int32
	once       sync.Once
	tab        *poolTable
}

// poolTable is everything about one pool that takes looking at its
// devices. Device, counter and counter set indices are pool-local.
type poolTable struct {
	a    *Allocator
	pool int32
	// dupNames: two devices of the generation share a name.
	dupNames bool
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
	arena []counterUse
	// heldCtr are the held devices that consume counters.
	heldCtr   []int32
	allOnce   sync.Once
	setByName map[string]int32
	ctrByName map[string]map[string]int32
	sets      []setInfo
	avail     []uint64 // per counter: set amount minus what allocated devices consume
	// bindingConds per slice of the pool: it offers devices with binding
	// conditions.
	bindingConds []bool
	// overcommitted: some counter is already below zero. Upstream then
	// rejects every counter-consuming device of the pool, because it checks
	// all counters of the pool after adding a device.
	overcommitted bool
	// over are the counters allocated devices consume beyond their value
	// (kept at 0 in avail), sorted.
	over []int32
	// usesCompat: some device of the pool declares compatibility groups;
	// without any, the group check always admits and is skipped.
	usesCompat bool
	// badRefs: some device's mixins or consumed counters do not resolve.
	badRefs bool
	// badRange: some counter, consumption or capacity is out of
	// api.QuantityInRange.
	badRange bool
}

type sliceInfo struct {
	pool      int32
	s         *pool.Slice
	node      nodeSelection
	perDevice bool
	// perDeviceSet: perDeviceNodeSelection is set at all, even to false;
	// upstream ignores such slices without DRAPartitionableDevices.
	perDeviceSet bool
	// counters: the slice defines shared counters, so upstream treats it
	// as a counter slice and never offers its devices.
	counters bool
	local    int32 // index among the pool's slices
	devStart int32 // pool-local
	devEnd   int32
}

// nodeSelection is one of nodeName, allNodes or a compiled nodeSelector.
// It is kept small because New makes one per slice of the cluster.
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
	rel int32 // counter index relative to the pool's first counter
	amt uint64
}

type compatUse struct {
	set    int32 // pool-local counter set index
	groups []string
}

type devInfo struct {
	pool    int32
	slice   int32 // index in Allocator.slices
	idx     int32 // index in the pool's table
	d       *api.Device
	view    api.DeviceView
	viewErr error
	// attrErr: an attribute upstream cannot hand to CEL, which fails every
	// selector evaluated on the device (cel.CheckAttributes).
	attrErr error
	node    nodeSelection // only with perDeviceNodeSelection
	uses    []counterUse
	// bucket is the (pool-local) counter set of the first counter the
	// device consumes; bucketUses are its uses within that set. The search bound
	// groups devices by it.
	bucket     int32
	bucketUses []counterUse
	compat     []compatUse
	cap        map[api.QualifiedName]api.DeviceCapacity
	multi      bool
	// allocated: held by an allocated claim as a dedicated device.
	allocated bool
	// shareInUse: an allocated claim holds a share of it (shareID or
	// consumed capacity). Such a device's counters are already consumed.
	shareInUse bool
	aggCap     map[api.QualifiedName]resource.Quantity
}

func (a *Allocator) devID(d *devInfo) string {
	p := a.pools[d.pool].p
	return p.Driver + "/" + p.Pool + "/" + d.d.Name
}

type setInfo struct {
	name     string
	ctrStart int32 // pool-local index of its first counter
	names    []string
	milli    []bool
	devices  []int32 // devices consuming from the set, for BestFit scoring
	baseline compatState
}

// New builds an Allocator. It fails only on input it cannot index at all
// (nil pool); invalid pools, unknown classes and bad selectors are reported
// by Allocate when they matter, as upstream does. Its cost is linear in the
// number of slices and allocated results, with a small constant: devices
// are not looked at until a node sees their pool.
func New(in Input, opts Options) (*Allocator, error) {
	a := &Allocator{
		opts:    opts,
		g:       newGates(opts.Features),
		classes: make(map[string]*resourcev1.DeviceClass, len(in.Classes)),
		held:    make(map[pool.ID][]*resourcev1.DeviceRequestAllocationResult),
	}
	if a.opts.Compiler == nil {
		a.opts.Compiler = defaultCompiler()
	}
	if a.opts.NewShareID == nil {
		a.opts.NewShareID = randomShareID
	}
	for _, c := range in.Classes {
		if c != nil {
			a.classes[c.Name] = c
		}
	}
	pools := slices.Clone(in.Pools)
	nSlices := 0
	for _, p := range pools {
		if p == nil {
			return nil, fmt.Errorf("allocator: nil pool in input")
		}
		nSlices += len(p.Slices)
	}
	slices.SortStableFunc(pools, func(x, y *pool.Pool) int { return x.ID.Compare(y.ID) })
	var gens []*pool.Pool
	for _, p := range pools {
		nSlices += len(p.Older)
		if len(p.Older) == 0 {
			gens = append(gens, p)
			continue
		}
		gens = append(gens, p.Generations()...)
	}
	a.pools = make([]poolInfo, len(gens))
	a.slices = make([]sliceInfo, 0, nSlices)
	for pi, p := range gens {
		a.addPool(int32(pi), p)
		a.pools[pi].newer = pi > 0 && gens[pi-1].ID == p.ID
	}
	a.addAllocated(in.Allocated)
	if a.opts.Cache != nil {
		a.seq = a.opts.Cache.begin()
	}
	a.sel = newSelectorCache(a.opts.Compiler, len(a.slices), a.opts.Cache, a.seq)
	a.attrs = newAttrCache(len(a.slices))
	return a, nil
}

func (a *Allocator) addPool(pi int32, p *pool.Pool) {
	info := &a.pools[pi]
	info.p, info.firstSlice = p, int32(len(a.slices))
	for k, s := range p.Slices {
		sl := sliceInfo{pool: pi, s: s, perDevice: ptr.Deref(s.Spec.PerDeviceNodeSelection, false),
			perDeviceSet: s.Spec.PerDeviceNodeSelection != nil,
			counters:     len(s.Spec.SharedCounters) > 0, local: int32(k), devStart: info.nDevs}
		sl.node = newNodeSelection(s.Spec.NodeName, s.Spec.AllNodes, s.Spec.NodeSelector)
		info.nDevs += int32(len(s.Spec.Devices))
		sl.devEnd = info.nDevs
		slIdx := int32(len(a.slices))
		if sl.node.name == "" && (sl.node.set() || sl.perDevice) {
			a.shared = append(a.shared, slIdx)
		}
		a.slices = append(a.slices, sl)
	}
}

// namedSlices calls f for every slice that names node, by index or by a
// scan (see byNode).
func (a *Allocator) namedSlices(node string, f func(int32) error) error {
	if node == "" {
		return nil // no slice names the empty node
	}
	if a.nodeCalls.Add(1) == 1 {
		for i := range a.slices {
			if a.slices[i].node.name == node {
				if err := f(int32(i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	a.nodeOnce.Do(func() {
		a.byNode = make(map[string][]int32)
		for i := range a.slices {
			if n := a.slices[i].node.name; n != "" {
				a.byNode[n] = append(a.byNode[n], int32(i))
			}
		}
	})
	for _, si := range a.byNode[node] {
		if err := f(si); err != nil {
			return err
		}
	}
	return nil
}

// addAllocated files the results of allocated claims under their pool, the
// way kube-scheduler builds its allocated state: admin-access results do
// not count.
func (a *Allocator) addAllocated(claims []*resourcev1.ResourceClaim) {
	for _, c := range claims {
		if c == nil || c.Status.Allocation == nil {
			continue
		}
		for i := range c.Status.Allocation.Devices.Results {
			r := &c.Status.Allocation.Devices.Results[i]
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := pool.ID{Driver: r.Driver, Pool: r.Pool}
			a.held[id] = append(a.held[id], r)
		}
	}
}

// table returns the pool's device table, building it on first use.
func (a *Allocator) table(pi int32) *poolTable {
	p := &a.pools[pi]
	p.once.Do(func() { p.tab = a.buildTable(pi) })
	return p.tab
}

func (a *Allocator) buildTable(pi int32) *poolTable {
	info := &a.pools[pi]
	p := info.p
	t := &poolTable{a: a, pool: pi, devs: make([]devInfo, info.nDevs), ready: make([]atomic.Bool, info.nDevs),
		bindingConds: make([]bool, len(p.Slices)), setByName: map[string]int32{}, ctrByName: map[string]map[string]int32{}}
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
		si := setInfo{name: n, ctrStart: int32(len(t.avail))}
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
			byCtr[c] = int32(len(t.avail))
			if !api.CounterInRange(v.Value) {
				// The view's validation reports it; the pool is not used.
				t.badRange = true
			}
			// Milli units keep fractional counters exact; counters too large
			// for that (beyond ~1 PB of bytes) fall back to whole units.
			milli := api.CounterInRange(v.Value) && v.Value.CmpInt64(1<<50) < 0
			si.milli[j] = milli
			t.avail = append(t.avail, scaled(v.Value, milli))
		}
		t.setByName[n] = int32(len(t.sets))
		t.ctrByName[n] = byCtr
		t.sets = append(t.sets, si)
	}
	names = make([]string, 0, info.nDevs)
	for k, s := range p.Slices {
		counters := a.slices[info.firstSlice+int32(k)].counters
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if d.BindingConditions != nil && !counters {
				t.bindingConds[k] = true
			}
			t.scanRefs(s, d)
			names = append(names, d.Name)
		}
	}
	if len(names) > 1 {
		slices.Sort(names)
		t.dupNames = len(slices.Compact(names)) != len(names)
	}
	t.applyHeld(a.held[p.ID])
	t.finishCounters(a.slices)
	return t
}

// scanRefs is the part of building a device entry that the pool needs
// before any device is used: whether its mixins and consumed counters
// resolve (pool validity) and whether it declares compatibility groups. It
// allocates nothing, so seeing a pool costs little more than its size.
func (t *poolTable) scanRefs(s *pool.Slice, d *api.Device) {
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
func (t *poolTable) suspect(p *pool.Pool, nSets int) bool {
	if t.badRefs {
		return true
	}
	declared := 0
	for _, s := range p.Slices {
		declared += len(s.Spec.SharedCounters)
	}
	return declared != nSets
}

// dev returns the pool-local device i, building its entry the first time:
// a cold scheduling cycle looks at a few devices of each pool, so entries
// for the rest would be wasted work.
func (t *poolTable) dev(i int32) *devInfo {
	if !t.ready[i].Load() {
		t.build(i)
	}
	return &t.devs[i]
}

func (t *poolTable) build(i int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ready[i].Load() {
		return
	}
	a := t.a
	info := &a.pools[t.pool]
	// Slices of a pool are few; find the device's slice by its range.
	k := info.firstSlice
	for a.slices[k].devEnd <= i {
		k++
	}
	sl := &a.slices[k]
	t.newDev(k, sl.s, &sl.s.Spec.Devices[i-sl.devStart], i)
	t.ready[i].Store(true)
}

// all builds every device entry and the per-set device lists, which only
// BestFit scoring reads.
func (t *poolTable) all() {
	t.allOnce.Do(func() {
		for i := range t.devs {
			d := t.dev(int32(i))
			if d.viewErr != nil {
				continue
			}
			for _, cv := range d.view.Consumptions {
				if set, ok := t.setByName[cv.CounterSet()]; ok {
					t.sets[set].devices = append(t.sets[set].devices, d.idx)
				}
			}
		}
	})
}

// newDev fills entry i; t.mu is held. Counter uses live in one arena per
// pool and a device without mixins reads its own capacity map, so an entry
// usually costs no allocation of its own.
func (t *poolTable) newDev(slIdx int32, s *pool.Slice, d *api.Device, i int32) {
	dev := &t.devs[i]
	// allocated, shareInUse and aggCap were set by applyHeld already.
	dev.pool, dev.slice, dev.idx, dev.d, dev.bucket = t.pool, slIdx, i, d, -1
	// Without DRAConsumableCapacity every device is allocated whole.
	dev.multi = t.a.g.consumable && ptr.Deref(d.AllowMultipleAllocations, false)
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
	start := len(t.arena)
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
			t.arena = append(t.arena, counterUse{rel: rel, amt: scaled(c.Value, milli)})
		}
	}
	if len(t.arena) == start {
		return
	}
	// Later appends may move the arena; entries keep the array they saw.
	dev.uses = t.arena[start:len(t.arena):len(t.arena)]
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

// applyHeld marks the devices of allocated claims: results with a shareID
// are shares (their consumed capacity adds up per device); everything else
// is a dedicated device.
func (t *poolTable) applyHeld(held []*resourcev1.DeviceRequestAllocationResult) {
	if len(held) == 0 {
		return
	}
	// Only the held names are indexed: a pool is usually much larger than
	// what its allocated claims hold. A result names a device by name, so
	// every device of that name is held: with duplicate names in slices a
	// node does not see, the pool is still valid for the node.
	type place struct {
		idx      int32
		counters bool
	}
	byName := make(map[string][]place, len(held))
	for _, r := range held {
		byName[r.Device] = nil
	}
	p := &t.a.pools[t.pool]
	n := int32(0)
	for _, sl := range p.p.Slices {
		for i := range sl.Spec.Devices {
			d := &sl.Spec.Devices[i]
			if pls, ok := byName[d.Name]; ok {
				byName[d.Name] = append(pls, place{idx: n, counters: len(d.ConsumesCounters) > 0})
			}
			n++
		}
	}
	for _, r := range held {
		for _, pl := range byName[r.Device] {
			t.hold(r, pl.idx, pl.counters)
		}
	}
}

// hold marks device idx as held by result r: results with a shareID are
// shares (their consumed capacity adds up per device); everything else
// holds the device whole. The entry itself is built lazily; these fields
// survive that.
func (t *poolTable) hold(r *resourcev1.DeviceRequestAllocationResult, idx int32, counters bool) {
	d := &t.devs[idx]
	if !d.allocated && !d.shareInUse && counters {
		t.heldCtr = append(t.heldCtr, idx)
	}
	if r.ShareID == nil {
		d.allocated = true
		return
	}
	d.shareInUse = true
	if r.ConsumedCapacity != nil {
		if d.aggCap == nil {
			d.aggCap = map[api.QualifiedName]resource.Quantity{}
		}
		for name, q := range r.ConsumedCapacity {
			cur := d.aggCap[name]
			cur.Add(q)
			d.aggCap[name] = cur
		}
	}
}

// finishCounters subtracts what allocated devices consume (each device
// once, however many shares it has) and seeds the compatibility-group
// baselines from them.
func (t *poolTable) finishCounters(all []sliceInfo) {
	// Device order, as upstream: group baselines depend on it.
	slices.Sort(t.heldCtr)
	for _, i := range t.heldCtr {
		d := t.dev(i)
		if all[d.slice].counters {
			continue
		}
		for _, u := range d.uses {
			if u.amt > t.avail[u.rel] {
				// Allocated devices consume more than there is.
				t.over = append(t.over, u.rel)
				t.avail[u.rel] = 0
				continue
			}
			t.avail[u.rel] -= u.amt
		}
		for _, cu := range d.compat {
			t.sets[cu.set].baseline = t.sets[cu.set].baseline.add(cu.groups)
		}
	}
	if len(t.over) > 0 {
		t.overcommitted = true
		slices.Sort(t.over)
	}
}

// counterName names a pool-local counter as "<set>/<counter>".
func (t *poolTable) counterName(rel int32) string {
	if s := t.setOfCounter(rel); s >= 0 {
		return t.sets[s].name + "/" + t.sets[s].names[rel-t.sets[s].ctrStart]
	}
	return "?"
}

// setOfCounter returns the pool-local set index of a pool-local counter.
func (t *poolTable) setOfCounter(rel int32) int32 {
	for s := range t.sets {
		si := &t.sets[s]
		if rel >= si.ctrStart && rel < si.ctrStart+int32(len(si.names)) {
			return int32(s)
		}
	}
	return -1
}

func (d *devInfo) perDevice() bool { return d.node.set() }
