package allocator

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/pool"
)

// Allocator holds the warm state for one cluster state. It is safe for
// concurrent use; the only mutable parts are caches that every goroutine
// fills with the same values.
type Allocator struct {
	opts    Options
	pools   []poolInfo
	slices  []sliceInfo
	devs    []devInfo
	sets    []setInfo
	avail   []int64 // per counter: set amount minus what allocated devices consume
	classes map[string]*resourcev1.DeviceClass
	byNode  map[string][]int32 // slices that name a node, by node name
	shared  []int32            // slices that name no node
	sel     *selectorCache
	attrs   *attrCache
}

type poolInfo struct {
	p        *pool.Pool
	complete bool
	invalid  *pool.InvalidError
	devStart int32
	devEnd   int32
	setStart int32
	setEnd   int32
	ctrStart int32
	ctrEnd   int32
	// overcommitted: some counter is already below zero. Upstream then
	// rejects every counter-consuming device of the pool, because it checks
	// all counters of the pool after adding a device.
	overcommitted bool
	// usesCompat: some device of the pool declares compatibility groups;
	// without any, the group check always admits and is skipped.
	usesCompat bool
}

type sliceInfo struct {
	pool      int32
	s         *pool.Slice
	node      nodeSelection
	perDevice bool
	// counters: the slice defines shared counters, so upstream treats it
	// as a counter slice and never offers its devices.
	counters     bool
	bindingConds bool
	devStart     int32
	devEnd       int32
}

// nodeSelection is one of nodeName, allNodes or a compiled nodeSelector.
type nodeSelection struct {
	name     string
	all      bool
	selector *corev1.NodeSelector
	compiled *nodeaffinity.NodeSelector
	err      error
}

func newNodeSelection(name *string, all *bool, sel *corev1.NodeSelector) nodeSelection {
	ns := nodeSelection{name: ptr.Deref(name, ""), all: ptr.Deref(all, false), selector: sel}
	if ns.name == "" && !ns.all && sel != nil {
		ns.compiled, ns.err = nodeaffinity.NewNodeSelector(sel)
	}
	return ns
}

func (ns *nodeSelection) set() bool { return ns.name != "" || ns.all || ns.selector != nil }

// matches mirrors upstream NodeMatches: nodeName wins over allNodes, which
// wins over nodeSelector; nothing set matches nothing.
func (ns *nodeSelection) matches(node *corev1.Node) (bool, error) {
	switch {
	case ns.name != "":
		return node.Name == ns.name, nil
	case ns.all:
		return true, nil
	case ns.selector != nil:
		if ns.err != nil {
			return false, fmt.Errorf("failed to parse node selector: %w", ns.err)
		}
		return ns.compiled.Match(node), nil
	}
	return false, nil
}

type counterUse struct {
	rel int32 // counter index relative to the pool's first counter
	amt int64
}

type compatUse struct {
	set    int32 // global counter set index
	groups []string
}

type devInfo struct {
	pool    int32
	slice   int32
	d       *api.Device
	view    api.DeviceView
	viewErr error
	node    nodeSelection // only with perDeviceNodeSelection
	uses    []counterUse
	// bucket is the global counter set of the first counter the device
	// consumes; bucketUses are its uses within that set. The search bound
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

func (a *Allocator) devID(g int32) string {
	d := &a.devs[g]
	p := a.pools[d.pool].p
	return p.Driver + "/" + p.Pool + "/" + d.d.Name
}

type setInfo struct {
	pool     int32
	name     string
	ctrStart int32 // global index of its first counter
	names    []string
	milli    []bool
	devices  []int32 // devices consuming from the set, for BestFit scoring
	baseline compatState
}

// New builds an Allocator. It fails only on input it cannot index at all
// (nil pool); invalid pools, unknown classes and bad selectors are reported
// by Allocate when they matter, as upstream does.
func New(in Input, opts Options) (*Allocator, error) {
	a := &Allocator{
		opts:    opts,
		classes: make(map[string]*resourcev1.DeviceClass, len(in.Classes)),
		byNode:  make(map[string][]int32),
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
	for _, p := range pools {
		if p == nil {
			return nil, fmt.Errorf("allocator: nil pool in input")
		}
	}
	slices.SortStableFunc(pools, func(x, y *pool.Pool) int { return x.ID.Compare(y.ID) })
	byKey := map[string]int32{}
	for _, p := range pools {
		a.addPool(p, byKey)
	}
	a.addAllocated(in.Allocated, byKey)
	a.finishCounters()
	a.sel = newSelectorCache(a.opts.Compiler, len(a.devs))
	a.attrs = newAttrCache(len(a.devs))
	return a, nil
}

func devKey(driver, pool, device string) string { return driver + "\x00" + pool + "\x00" + device }

func (a *Allocator) addPool(p *pool.Pool, byKey map[string]int32) {
	pi := int32(len(a.pools))
	info := poolInfo{p: p, complete: p.Complete(), devStart: int32(len(a.devs)),
		setStart: int32(len(a.sets)), ctrStart: int32(len(a.avail))}
	if info.complete {
		info.invalid = p.Validate()
	}
	// Counter sets first so that device consumption can refer to them.
	setByName := map[string]int32{}
	ctrByName := map[string]map[string]int32{}
	sets := p.CounterSets()
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		cs := sets[n]
		si := setInfo{pool: pi, name: n, ctrStart: int32(len(a.avail))}
		var ctrs []string
		for c := range cs.Counters() {
			ctrs = append(ctrs, c)
		}
		slices.Sort(ctrs)
		byCtr := map[string]int32{}
		for _, c := range ctrs {
			v, _ := cs.Counter(c)
			byCtr[c] = int32(len(a.avail)) - info.ctrStart
			si.names = append(si.names, c)
			// Milli units keep fractional counters exact; counters too large
			// for that (beyond ~9 PB of bytes) fall back to whole units.
			milli := v.Value.CmpInt64(1<<50) < 0
			si.milli = append(si.milli, milli)
			a.avail = append(a.avail, scaled(v.Value, milli))
		}
		setByName[n] = int32(len(a.sets))
		ctrByName[n] = byCtr
		a.sets = append(a.sets, si)
	}
	info.setEnd, info.ctrEnd = int32(len(a.sets)), int32(len(a.avail))

	for _, s := range p.Slices {
		sl := sliceInfo{pool: pi, s: s, perDevice: ptr.Deref(s.Spec.PerDeviceNodeSelection, false),
			counters: len(s.Spec.SharedCounters) > 0, devStart: int32(len(a.devs))}
		sl.node = newNodeSelection(s.Spec.NodeName, s.Spec.AllNodes, s.Spec.NodeSelector)
		slIdx := int32(len(a.slices))
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if d.BindingConditions != nil && !sl.counters {
				sl.bindingConds = true
			}
			a.devs = append(a.devs, a.newDev(pi, slIdx, s, d, &info, setByName, ctrByName))
			byKey[devKey(p.Driver, p.Pool, d.Name)] = int32(len(a.devs) - 1)
		}
		sl.devEnd = int32(len(a.devs))
		if n := ptr.Deref(s.Spec.NodeName, ""); n != "" {
			a.byNode[n] = append(a.byNode[n], slIdx)
		} else {
			a.shared = append(a.shared, slIdx)
		}
		a.slices = append(a.slices, sl)
	}
	info.devEnd = int32(len(a.devs))
	a.pools = append(a.pools, info)
}

func (a *Allocator) newDev(pi, slIdx int32, s *pool.Slice, d *api.Device, info *poolInfo,
	setByName map[string]int32, ctrByName map[string]map[string]int32) devInfo {
	dev := devInfo{pool: pi, slice: slIdx, d: d, multi: ptr.Deref(d.AllowMultipleAllocations, false)}
	dev.view, dev.viewErr = s.Mixins.Device(d)
	if ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
		dev.node = newNodeSelection(d.NodeName, d.AllNodes, d.NodeSelector)
	}
	if dev.viewErr != nil {
		return dev
	}
	for name, c := range dev.view.Capacities() {
		if dev.cap == nil {
			dev.cap = map[api.QualifiedName]api.DeviceCapacity{}
		}
		dev.cap[name] = c
	}
	for _, cv := range dev.view.Consumptions {
		set, ok := setByName[cv.CounterSet()]
		if !ok {
			continue // pool validation reports it
		}
		if len(cv.Consumption.CompatibilityGroups) > 0 {
			info.usesCompat = true
		}
		dev.compat = append(dev.compat, compatUse{set: set, groups: sortedUnique(cv.Consumption.CompatibilityGroups)})
		a.sets[set].devices = append(a.sets[set].devices, int32(len(a.devs)))
		for name, c := range cv.Counters() {
			rel, ok := ctrByName[cv.CounterSet()][name]
			if !ok {
				continue
			}
			milli := a.sets[set].milli[rel-(a.sets[set].ctrStart-info.ctrStart)]
			dev.uses = append(dev.uses, counterUse{rel: rel, amt: scaled(c.Value, milli)})
		}
	}
	// Deterministic order makes counter-exhaustion details stable.
	slices.SortFunc(dev.uses, func(x, y counterUse) int { return cmp.Compare(x.rel, y.rel) })
	dev.bucket = -1
	if len(dev.uses) > 0 {
		first := info.ctrStart + dev.uses[0].rel
		for s := info.setStart; s < int32(len(a.sets)); s++ {
			si := &a.sets[s]
			if first >= si.ctrStart && first < si.ctrStart+int32(len(si.names)) {
				dev.bucket = s
				for _, u := range dev.uses {
					if g := info.ctrStart + u.rel; g >= si.ctrStart && g < si.ctrStart+int32(len(si.names)) {
						dev.bucketUses = append(dev.bucketUses, u)
					}
				}
			}
		}
	}
	return dev
}

func scaled(q resource.Quantity, milli bool) int64 {
	if milli {
		return q.MilliValue()
	}
	return q.Value()
}

func sortedUnique(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// addAllocated marks devices of allocated claims the way kube-scheduler
// builds its allocated state: admin-access results do not count; results
// with a shareID are shares (their consumed capacity adds up per device);
// everything else is a dedicated device.
func (a *Allocator) addAllocated(claims []*resourcev1.ResourceClaim, byKey map[string]int32) {
	for _, c := range claims {
		if c == nil || c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			g, ok := byKey[devKey(r.Driver, r.Pool, r.Device)]
			if !ok {
				continue
			}
			d := &a.devs[g]
			if r.ShareID == nil {
				d.allocated = true
				continue
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
	}
}

// finishCounters subtracts what allocated devices consume (each device
// once, however many shares it has) and seeds the compatibility-group
// baselines from them.
func (a *Allocator) finishCounters() {
	for pi := range a.pools {
		p := &a.pools[pi]
		for g := p.devStart; g < p.devEnd; g++ {
			d := &a.devs[g]
			if a.slices[d.slice].counters || !(d.allocated || d.shareInUse) {
				continue
			}
			for _, u := range d.uses {
				a.avail[p.ctrStart+u.rel] -= u.amt
			}
			for _, cu := range d.compat {
				a.sets[cu.set].baseline = a.sets[cu.set].baseline.add(cu.groups)
			}
		}
		for c := p.ctrStart; c < p.ctrEnd; c++ {
			if a.avail[c] < 0 {
				p.overcommitted = true
			}
		}
	}
}

// counterName names a pool-relative counter as "<set>/<counter>".
func (a *Allocator) counterName(pi int32, rel int32) string {
	p := &a.pools[pi]
	g := p.ctrStart + rel
	for s := p.setStart; s < p.setEnd; s++ {
		si := &a.sets[s]
		if g >= si.ctrStart && g < si.ctrStart+int32(len(si.names)) {
			return si.name + "/" + si.names[g-si.ctrStart]
		}
	}
	return "?"
}

// setOfCounter returns the global set index of a pool-relative counter.
func (a *Allocator) setOfCounter(pi int32, rel int32) int32 {
	p := &a.pools[pi]
	g := p.ctrStart + rel
	for s := p.setStart; s < p.setEnd; s++ {
		si := &a.sets[s]
		if g >= si.ctrStart && g < si.ctrStart+int32(len(si.names)) {
			return s
		}
	}
	return -1
}

func (d *devInfo) perDevice() bool { return d.node.set() }
