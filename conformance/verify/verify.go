// Package verify checks an allocation result against the scenario it was
// computed for, independently of any allocator: device existence and pool
// state, node access, selectors (via upstream CEL), taints, admin access,
// double allocation, shared counters, consumable capacity, request counts
// and claim constraints.
package verify

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/conformance/scenario"
)

type devKey struct{ driver, pool, device string }

func (k devKey) String() string { return k.driver + "/" + k.pool + "/" + k.device }

type device struct {
	*resourcev1.Device
	slice *resourcev1.ResourceSlice
	pool  *pool
}

type pool struct {
	driver, name string
	gen          int64
	slices       []*resourcev1.ResourceSlice
	problem      string // incomplete or invalid, whatever the node
	// dups are the devices of names that occur more than once. Upstream
	// checks names only among the slices a node sees (problemFor).
	dups    map[string][]*device
	devices map[string]*device
	sets    map[string]map[string]resource.Quantity
}

// Verifier holds the scenario in the form needed for checks.
type Verifier struct {
	sc      *scenario.Scenario
	pools   map[[2]string]*pool
	order   [][2]string
	classes map[string]*resourcev1.DeviceClass
	cel     map[string]cel.CompilationResult
}

var compiler = cel.GetCompiler(cel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})

// New prepares a verifier. Mixins are flattened first.
func New(sc *scenario.Scenario) (*Verifier, error) {
	v1, err := sc.V1Slices()
	if err != nil {
		return nil, err
	}
	v := &Verifier{sc: sc, pools: map[[2]string]*pool{}, classes: map[string]*resourcev1.DeviceClass{}, cel: map[string]cel.CompilationResult{}}
	for _, c := range sc.Classes {
		v.classes[c.Name] = c
	}
	for _, s := range v1 {
		id := [2]string{s.Spec.Driver, s.Spec.Pool.Name}
		p := v.pools[id]
		if p == nil {
			p = &pool{driver: id[0], name: id[1], gen: s.Spec.Pool.Generation}
			v.pools[id] = p
			v.order = append(v.order, id)
		}
		switch {
		case s.Spec.Pool.Generation > p.gen:
			p.gen, p.slices = s.Spec.Pool.Generation, nil
		case s.Spec.Pool.Generation < p.gen:
			continue
		}
		p.slices = append(p.slices, s)
	}
	for _, p := range v.pools {
		p.devices = map[string]*device{}
		p.sets = map[string]map[string]resource.Quantity{}
		var probs []string
		count := p.slices[0].Spec.Pool.ResourceSliceCount
		for _, s := range p.slices {
			if s.Spec.Pool.ResourceSliceCount != count {
				probs = append(probs, "slices disagree on resourceSliceCount")
			}
		}
		if int64(len(p.slices)) != count {
			probs = append(probs, fmt.Sprintf("incomplete: %d of %d slices", len(p.slices), count))
		}
		for _, s := range p.slices {
			for _, cs := range s.Spec.SharedCounters {
				if _, dup := p.sets[cs.Name]; dup {
					probs = append(probs, "duplicate counter set "+cs.Name)
				}
				m := map[string]resource.Quantity{}
				for n, c := range cs.Counters {
					m[n] = c.Value
				}
				p.sets[cs.Name] = m
			}
		}
		for _, s := range p.slices {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				dev := &device{Device: d, slice: s, pool: p}
				if first, dup := p.devices[d.Name]; dup {
					if p.dups == nil {
						p.dups = map[string][]*device{}
					}
					if len(p.dups[d.Name]) == 0 {
						p.dups[d.Name] = []*device{first}
					}
					p.dups[d.Name] = append(p.dups[d.Name], dev)
				} else {
					p.devices[d.Name] = dev
				}
				for _, c := range d.ConsumesCounters {
					set, ok := p.sets[c.CounterSet]
					if !ok {
						probs = append(probs, "missing counter set "+c.CounterSet)
						continue
					}
					for n := range c.Counters {
						if _, ok := set[n]; !ok {
							probs = append(probs, "missing counter "+n)
						}
					}
				}
			}
		}
		p.problem = strings.Join(probs, "; ")
	}
	return v, nil
}

// problemFor is why the pool cannot be used on the node: its own problem,
// or two devices of one name in slices the node sees.
func (p *pool) problemFor(node *corev1.Node) string {
	probs := []string{}
	if p.problem != "" {
		probs = append(probs, p.problem)
	}
	names := make([]string, 0, len(p.dups))
	for n := range p.dups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		seen := 0
		for _, d := range p.dups[n] {
			if sliceVisible(d.slice, node) {
				seen++
			}
		}
		if seen > 1 {
			probs = append(probs, "duplicate device "+n)
		}
	}
	return strings.Join(probs, "; ")
}

// sliceVisible: the slice targets the node, by its own node selection or,
// with per-device node selection, through any of its devices.
func sliceVisible(s *resourcev1.ResourceSlice, node *corev1.Node) bool {
	if ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if ok, _ := nodeMatches(node, d.NodeName, d.AllNodes, d.NodeSelector); ok {
				return true
			}
		}
		return false
	}
	ok, _ := nodeMatches(node, s.Spec.NodeName, s.Spec.AllNodes, s.Spec.NodeSelector)
	return ok
}

// lookupFor is lookup, preferring among devices of one name the one the
// node sees.
func (v *Verifier) lookupFor(node *corev1.Node, driver, poolName, dev string) *device {
	d := v.lookup(driver, poolName, dev)
	if d == nil {
		return nil
	}
	for _, x := range d.pool.dups[dev] {
		if x.visible(node) {
			return x
		}
	}
	return d
}

func nodeMatches(node *corev1.Node, name *string, all *bool, sel *corev1.NodeSelector) (bool, error) {
	switch {
	case ptr.Deref(name, "") != "":
		return *name == node.Name, nil
	case ptr.Deref(all, false):
		return true, nil
	case sel != nil:
		ns, err := nodeaffinity.NewNodeSelector(sel)
		if err != nil {
			return false, err
		}
		return ns.Match(node), nil
	}
	return false, nil
}

func (d *device) visible(node *corev1.Node) bool {
	s := d.slice
	if ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
		ok, _ := nodeMatches(node, d.NodeName, d.AllNodes, d.NodeSelector)
		return ok
	}
	ok, _ := nodeMatches(node, s.Spec.NodeName, s.Spec.AllNodes, s.Spec.NodeSelector)
	return ok
}

func (v *Verifier) matches(ctx context.Context, d *device, exprs []string) (bool, error) {
	for _, e := range exprs {
		c, ok := v.cel[e]
		if !ok {
			c = compiler.CompileCELExpression(e, cel.Options{})
			v.cel[e] = c
		}
		if c.Error != nil {
			return false, c.Error
		}
		m, _, err := c.DeviceMatches(ctx, cel.Device{Driver: d.pool.driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
		if err != nil {
			return false, err
		}
		if !m {
			return false, nil
		}
	}
	return true, nil
}

func tolerated(t resourcev1.DeviceTaint, tols []resourcev1.DeviceToleration) bool {
	for _, tol := range tols {
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		switch tol.Operator {
		case resourcev1.DeviceTolerationOpExists:
			return true
		case resourcev1.DeviceTolerationOpEqual, "":
			if tol.Value == t.Value {
				return true
			}
		}
	}
	return false
}

// req is an exact request or a subrequest, as a result refers to it.
type req struct {
	name      string // "r" or "r/s"
	parent    string // "r"
	class     string
	selectors []resourcev1.DeviceSelector
	mode      resourcev1.DeviceAllocationMode
	count     int64
	admin     bool
	tols      []resourcev1.DeviceToleration
	capacity  *resourcev1.CapacityRequirements
}

func requests(c *resourcev1.ResourceClaim) map[string]*req {
	out := map[string]*req{}
	for _, r := range c.Spec.Devices.Requests {
		if e := r.Exactly; e != nil {
			out[r.Name] = &req{r.Name, r.Name, e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count, ptr.Deref(e.AdminAccess, false), e.Tolerations, e.Capacity}
		}
		for _, s := range r.FirstAvailable {
			n := r.Name + "/" + s.Name
			out[n] = &req{n, r.Name, s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count, false, s.Tolerations, s.Capacity}
		}
	}
	return out
}

func (v *Verifier) exprs(r *req) ([]string, error) {
	class, ok := v.classes[r.class]
	if !ok {
		return nil, fmt.Errorf("class %q does not exist", r.class)
	}
	var out []string
	for _, s := range class.Spec.Selectors {
		out = append(out, s.CEL.Expression)
	}
	for _, s := range r.selectors {
		out = append(out, s.CEL.Expression)
	}
	return out, nil
}

func (v *Verifier) lookup(driver, poolName, dev string) *device {
	p := v.pools[[2]string{driver, poolName}]
	if p == nil {
		return nil
	}
	return p.devices[dev]
}

func attr(d *device, name resourcev1.FullyQualifiedName) (resourcev1.DeviceAttribute, bool) {
	s := string(name)
	i := strings.Index(s, "/")
	domain, id := s[:i], s[i+1:]
	if a, ok := d.Attributes[resourcev1.QualifiedName(s)]; ok {
		return a, true
	}
	if domain == d.pool.driver {
		a, ok := d.Attributes[resourcev1.QualifiedName(id)]
		return a, ok
	}
	return resourcev1.DeviceAttribute{}, false
}

func attrString(a resourcev1.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return "s:" + *a.StringValue
	case a.IntValue != nil:
		return fmt.Sprintf("i:%d", *a.IntValue)
	case a.BoolValue != nil:
		return fmt.Sprintf("b:%t", *a.BoolValue)
	case a.VersionValue != nil:
		return "v:" + *a.VersionValue
	}
	return fmt.Sprintf("%v", a)
}

// Check verifies results (one per claim) for claims on node. It returns
// every violation found; none means the result is valid.
func (v *Verifier) Check(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim, results []*resourcev1.AllocationResult) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if len(results) != len(claims) {
		fail("%d results for %d claims", len(results), len(claims))
		return errs
	}

	// Devices held by existing allocations.
	held := map[devKey]bool{}
	usedCap := map[devKey]map[resourcev1.QualifiedName]resource.Quantity{}
	counted := map[devKey]bool{} // consuming counters
	addCap := func(k devKey, cc map[resourcev1.QualifiedName]resource.Quantity) {
		if usedCap[k] == nil {
			usedCap[k] = map[resourcev1.QualifiedName]resource.Quantity{}
		}
		for n, q := range cc {
			t := usedCap[k][n]
			t.Add(q)
			usedCap[k][n] = t
		}
	}
	for _, c := range v.sc.Allocated {
		for _, r := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			k := devKey{r.Driver, r.Pool, r.Device}
			counted[k] = true
			if r.ShareID == nil {
				held[k] = true
			} else {
				addCap(k, r.ConsumedCapacity)
			}
		}
	}

	newUse := map[devKey]string{}
	for ci, c := range claims {
		res := results[ci]
		if res == nil {
			fail("claim %s: no result", c.Name)
			continue
		}
		reqs := requests(c)
		perReq := map[string][]*device{}
		chosenSub := map[string]string{}
		claimUse := map[devKey]bool{}
		for _, r := range res.Devices.Results {
			where := fmt.Sprintf("claim %s request %s device %s/%s/%s", c.Name, r.Request, r.Driver, r.Pool, r.Device)
			rq := reqs[r.Request]
			if rq == nil {
				fail("%s: no such request", where)
				continue
			}
			if prev, ok := chosenSub[rq.parent]; ok && prev != rq.name {
				fail("%s: mixes subrequests %s and %s", where, prev, rq.name)
			}
			chosenSub[rq.parent] = rq.name
			k := devKey{r.Driver, r.Pool, r.Device}
			d := v.lookupFor(node, r.Driver, r.Pool, r.Device)
			if d == nil {
				fail("%s: device does not exist in the current generation", where)
				continue
			}
			perReq[rq.name] = append(perReq[rq.name], d)
			if prob := d.pool.problemFor(node); prob != "" {
				fail("%s: pool is unusable (%s)", where, prob)
			}
			if !d.visible(node) {
				fail("%s: device not accessible from node %s", where, node.Name)
			}
			exprs, err := v.exprs(rq)
			if err != nil {
				fail("%s: %v", where, err)
			} else if ok, err := v.matches(ctx, d, exprs); err != nil || !ok {
				fail("%s: selectors do not match (err=%v)", where, err)
			}
			for _, t := range d.Taints {
				if (t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute) && !tolerated(t, rq.tols) {
					fail("%s: taint %s=%s:%s not tolerated", where, t.Key, t.Value, t.Effect)
				}
			}
			if ptr.Deref(r.AdminAccess, false) != rq.admin {
				fail("%s: adminAccess %v, request says %v", where, ptr.Deref(r.AdminAccess, false), rq.admin)
			}
			multi := ptr.Deref(d.AllowMultipleAllocations, false)
			switch {
			case multi:
				if r.ShareID == nil {
					fail("%s: shared device without shareID", where)
				}
				var want map[resourcev1.QualifiedName]resource.Quantity
				if rq.capacity != nil {
					want = rq.capacity.Requests
				}
				for n, want := range want {
					got, ok := r.ConsumedCapacity[n]
					if !ok || got.Cmp(want) < 0 {
						fail("%s: consumed capacity %s=%v below requested %v", where, n, got.String(), want.String())
					}
				}
				if !rq.admin {
					addCap(k, r.ConsumedCapacity)
				}
			case rq.admin:
				if claimUse[k] {
					fail("%s: allocated twice in the claim", where)
				}
			default:
				if held[k] {
					fail("%s: already allocated to another claim", where)
				}
				if prev, ok := newUse[k]; ok {
					fail("%s: also allocated to %s", where, prev)
				}
				newUse[k] = where
			}
			claimUse[k] = true
			counted[k] = true
		}
		// Counts.
		for _, r := range c.Spec.Devices.Requests {
			name := r.Name
			if len(r.FirstAvailable) > 0 {
				name = chosenSub[r.Name]
				if name == "" {
					fail("claim %s request %s: no devices for any subrequest", c.Name, r.Name)
					continue
				}
			}
			rq := reqs[name]
			got := len(perReq[name])
			switch rq.mode {
			case resourcev1.DeviceAllocationModeAll:
				want := v.countAll(ctx, node, rq)
				if got != want || got == 0 {
					fail("claim %s request %s: mode All got %d devices, %d match", c.Name, name, got, want)
				}
			default:
				if int64(got) != max(rq.count, 1) {
					fail("claim %s request %s: got %d devices, want %d", c.Name, name, got, rq.count)
				}
			}
		}
		// Constraints.
		for i, con := range c.Spec.Devices.Constraints {
			var ds []*device
			for rname, list := range perReq {
				if len(con.Requests) == 0 || slices.Contains(con.Requests, rname) || slices.Contains(con.Requests, reqs[rname].parent) {
					ds = append(ds, list...)
				}
			}
			switch {
			case con.MatchAttribute != nil:
				vals := map[string]bool{}
				for _, d := range ds {
					a, ok := attr(d, *con.MatchAttribute)
					if !ok {
						fail("claim %s constraint %d: device %s lacks %s", c.Name, i, d.Name, *con.MatchAttribute)
						continue
					}
					vals[attrString(a)] = true
				}
				if len(vals) > 1 {
					fail("claim %s constraint %d: matchAttribute %s has %d values", c.Name, i, *con.MatchAttribute, len(vals))
				}
			case con.DistinctAttribute != nil:
				vals := map[string]bool{}
				for _, d := range ds {
					a, ok := attr(d, *con.DistinctAttribute)
					if !ok {
						fail("claim %s constraint %d: device %s lacks %s", c.Name, i, d.Name, *con.DistinctAttribute)
						continue
					}
					if vals[attrString(a)] {
						fail("claim %s constraint %d: distinctAttribute %s repeats %s", c.Name, i, *con.DistinctAttribute, attrString(a))
					}
					vals[attrString(a)] = true
				}
			}
		}
	}

	// Capacity of shared devices.
	for k, used := range usedCap {
		d := v.lookupFor(node, k.driver, k.pool, k.device)
		if d == nil {
			continue
		}
		for n, u := range used {
			c, ok := d.Capacity[n]
			if !ok {
				continue
			}
			if u.Cmp(c.Value) > 0 {
				fail("device %s: capacity %s over-consumed: %s > %s", k, n, u.String(), c.Value.String())
			}
		}
	}
	// Shared counters.
	sums := map[[2]string]map[string]map[string]resource.Quantity{}
	for k := range counted {
		d := v.lookupFor(node, k.driver, k.pool, k.device)
		if d == nil {
			continue
		}
		pid := [2]string{k.driver, k.pool}
		if sums[pid] == nil {
			sums[pid] = map[string]map[string]resource.Quantity{}
		}
		for _, cc := range d.ConsumesCounters {
			if sums[pid][cc.CounterSet] == nil {
				sums[pid][cc.CounterSet] = map[string]resource.Quantity{}
			}
			for n, q := range cc.Counters {
				t := sums[pid][cc.CounterSet][n]
				t.Add(q.Value)
				sums[pid][cc.CounterSet][n] = t
			}
		}
	}
	for pid, sets := range sums {
		p := v.pools[pid]
		for set, cs := range sets {
			for n, used := range cs {
				avail, ok := p.sets[set][n]
				if ok && used.Cmp(avail) > 0 {
					fail("pool %s/%s counter set %s counter %s: %s consumed of %s", pid[0], pid[1], set, n, used.String(), avail.String())
				}
			}
		}
	}
	return errs
}

// countAll is the number of devices a request in mode All must get: every
// device accessible from the node in a usable pool that matches.
func (v *Verifier) countAll(ctx context.Context, node *corev1.Node, rq *req) int {
	exprs, err := v.exprs(rq)
	if err != nil {
		return -1
	}
	n := 0
	for _, id := range v.order {
		p := v.pools[id]
		if p.problemFor(node) != "" {
			continue
		}
		for _, s := range p.slices {
			for i := range s.Spec.Devices {
				d := p.devices[s.Spec.Devices[i].Name]
				if d == nil || !d.visible(node) {
					continue
				}
				if ok, err := v.matches(ctx, d, exprs); err == nil && ok {
					n++
				}
			}
		}
	}
	return n
}
