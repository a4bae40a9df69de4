package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
)

// world is what a sequence of deltas was built from: three nodes with a
// partitionable GPU pool each (a counter slice and a device slice), and a
// pool that selects nodes by label. Slices change generation, lose
// devices, move to another pool or leave their pool incomplete.
type world struct {
	r     *rand.Rand
	nodes []*corev1.Node
}

func newWorld(seed int64) *world {
	return &world{r: rand.New(rand.NewSource(seed)), nodes: []*corev1.Node{
		at.Node("node-0", "rack", "a"), at.Node("node-1", "rack", "a"), at.Node("node-2", "rack", "b"),
	}}
}

var sliceNames = []string{"p0-c", "p0-d", "p1-c", "p1-d", "p2-c", "p2-d", "shared-d"}

// slice returns a random variant of the named slice.
func (w *world) slice(name string) *api.ResourceSlice {
	r := w.r
	if name == "shared-d" {
		b := at.Slice(name).Driver(driver).Pool("shared").Generation(int64(1 + r.Intn(2)))
		if r.Intn(2) == 0 {
			b.AllNodes()
		} else {
			b.NodeSelector("rack", []string{"a", "b"}[r.Intn(2)])
		}
		for i := range 1 + r.Intn(3) {
			b.Device(at.Device(at.Name("nic", i)).Str("kind", "nic"))
		}
		return b.Obj()
	}
	p := int(name[1] - '0')
	if r.Intn(8) == 0 {
		p = (p + 1) % 3 // the slice moves to another pool
	}
	pool, node := at.Name("p", p), at.Name("node", p)
	b := at.Slice(name).Driver(driver).Pool(pool).Node(node).Count(int64(2 + r.Intn(5)/4)).Generation(int64(1 + r.Intn(4)/3))
	if strings.HasSuffix(name, "-c") {
		return b.Counters("gpu", "memory", "40Gi").Obj()
	}
	devs := []*at.DeviceBuilder{at.Device("whole").Str("kind", "gpu").Int("numa", 0).Consumes("gpu", "memory", "40Gi")}
	for i := range 2 + r.Intn(3) {
		devs = append(devs, at.Device(at.Name("part", i)).Str("kind", "gpu").Int("numa", int64(i%2)).Consumes("gpu", "memory", "10Gi"))
	}
	return b.Device(devs...).Obj()
}

// devices are names a result may hold; some name no device.
func (w *world) result(req string) resourcev1.DeviceRequestAllocationResult {
	r := w.r
	if r.Intn(4) == 0 {
		return at.Result(req, driver, "shared", at.Name("nic", r.Intn(3)))
	}
	dev := "whole"
	if r.Intn(3) > 0 {
		dev = at.Name("part", r.Intn(4))
	}
	return at.Result(req, driver, at.Name("p", r.Intn(3)), dev)
}

func (w *world) claim(name string, allocated bool) *resourcev1.ResourceClaim {
	b := at.Claim(name).Request(at.Request("gpu", "gpu"))
	if allocated {
		rs := []resourcev1.DeviceRequestAllocationResult{w.result("gpu")}
		if w.r.Intn(3) == 0 {
			rs = append(rs, w.result("gpu"))
		}
		b.Allocated(rs...)
	}
	return b.Obj()
}

func (w *world) class() *resourcev1.DeviceClass {
	if w.r.Intn(2) == 0 {
		return at.Class("gpu", `device.driver == "`+driver+`"`)
	}
	return at.Class("gpu", `device.driver == "`+driver+`" && device.attributes["`+driver+`"].kind == "gpu"`)
}

// objects are the deltas the State accepted, as plain objects.
type objects struct {
	slices   map[string]*api.ResourceSlice
	classes  map[string]*resourcev1.DeviceClass
	observed map[state.ClaimKey]*resourcev1.ResourceClaim
	assumed  map[state.ClaimKey]state.Assumption
}

func newObjects() *objects {
	return &objects{slices: map[string]*api.ResourceSlice{}, classes: map[string]*resourcev1.DeviceClass{},
		observed: map[state.ClaimKey]*resourcev1.ResourceClaim{}, assumed: map[state.ClaimKey]state.Assumption{}}
}

func options() state.Options {
	return state.Options{NewShareID: func() types.UID { return "share" }}
}

// fromScratch builds a State from the objects in one go.
func (o *objects) fromScratch(t *testing.T) *state.State {
	t.Helper()
	st := state.New(options())
	for _, s := range o.slices {
		at.Must(t, st.SetMixinSlice(s))
	}
	for _, c := range o.classes {
		at.Must(t, st.SetClass(c))
	}
	for _, c := range o.observed {
		at.Must(t, st.SetClaim(c))
	}
	for k, a := range o.assumed {
		at.Must(t, st.AssumeBy(a.Claim, a.Owner))
		switch {
		case !a.HoldUntil.IsZero():
			at.Must(t, st.SetMaybeWritten(k.Namespace, k.Name, a.Written, a.HoldUntil))
		case a.Written != "":
			at.Must(t, st.SetWritten(k.Namespace, k.Name, a.Written))
		}
	}
	return st
}

// TestDeltasEqualFromScratch applies random deltas, good and bad, to a
// State and checks after each batch that it answers exactly as a State
// built from scratch from the objects it accepted: the same objects, pools,
// usage and node pools, and the same allocation (or error) on every node
// for every probe claim. A rejected delta must leave the State as it was.
func TestDeltasEqualFromScratch(t *testing.T) {
	seeds, steps := 6, 250
	if testing.Short() {
		seeds = 2
	}
	for seed := range int64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			w := newWorld(seed)
			st := state.New(options())
			o := newObjects()
			rejected := 0
			for step := range steps {
				before := st.Snapshot()
				op, err := w.delta(st, o)
				if err != nil {
					rejected++
					if after := st.Snapshot(); after != before {
						t.Fatalf("step %d (%s): rejected with %v but the state changed", step, op, err)
					}
					var nf *state.NotFoundError
					var conflict *state.ConflictError
					if !errors.As(err, &nf) && !errors.As(err, &conflict) && !strings.Contains(err.Error(), "claim") {
						t.Fatalf("step %d (%s): unexpected error %v", step, op, err)
					}
				}
				if step%5 == 4 {
					when := fmt.Sprintf("step %d (%s)", step, op)
					scratch := o.fromScratch(t)
					compare(t, w, st.Snapshot(), scratch.Snapshot(), when)
					o.compareAssumptions(t, st, when)
					o.compareAssumptions(t, scratch, when)
					o.compareWithAllocator(t, w, st.Snapshot(), when)
				}
			}
			if rejected == 0 || rejected > steps/2 {
				t.Errorf("%d of %d deltas rejected: the generator should make some, not mostly, bad ones", rejected, steps)
			}
		})
	}
}

// delta applies one random delta and, when the State accepts it, records
// it in o.
func (w *world) delta(st *state.State, o *objects) (string, error) {
	r := w.r
	claim := at.Name("c", r.Intn(6))
	key := state.ClaimKey{Namespace: "default", Name: claim}
	switch k := r.Intn(20); {
	case k < 5:
		s := w.slice(sliceNames[r.Intn(len(sliceNames))])
		err := st.SetMixinSlice(s)
		if err == nil {
			o.slices[s.Name] = s
		}
		return "set slice " + s.Name, err
	case k < 7:
		name := sliceNames[r.Intn(len(sliceNames))]
		err := st.DeleteSlice(name)
		if err == nil {
			delete(o.slices, name)
		}
		return "delete slice " + name, err
	case k < 8:
		if r.Intn(3) == 0 {
			err := st.DeleteClass("gpu")
			if err == nil {
				delete(o.classes, "gpu")
			}
			return "delete class", err
		}
		c := w.class()
		err := st.SetClass(c)
		if err == nil {
			o.classes[c.Name] = c
		}
		return "set class", err
	case k < 13:
		c := w.claim(claim, r.Intn(2) == 0)
		if a, ok := o.assumed[key]; ok && r.Intn(2) == 0 {
			// A binding's usual end: the allocation written as assumed.
			c = a.Claim.DeepCopy()
		}
		err := st.SetClaim(c)
		if err == nil {
			o.observed[key] = c
			if c.Status.Allocation != nil {
				delete(o.assumed, key)
			}
		}
		return "set claim " + claim, err
	case k < 15:
		err := st.DeleteClaim("default", claim)
		if err == nil {
			delete(o.observed, key)
			delete(o.assumed, key)
		}
		return "delete claim " + claim, err
	case k < 17:
		c := w.claim(claim, true)
		owner := owners[r.Intn(len(owners))]
		err := st.AssumeBy(c, owner)
		if err == nil {
			o.assumed[key] = state.Assumption{Claim: c, Owner: owner}
		}
		return "assume " + claim + " by " + owner, err
	case k < 18:
		version := fmt.Sprint(r.Intn(100))
		var holdUntil time.Time
		if r.Intn(2) == 0 {
			holdUntil = time.Unix(int64(r.Intn(100)), 0)
		}
		var err error
		if holdUntil.IsZero() {
			err = st.SetWritten("default", claim, version)
		} else {
			err = st.SetMaybeWritten("default", claim, version, holdUntil)
		}
		if err == nil {
			a := o.assumed[key]
			a.Written, a.HoldUntil = version, holdUntil
			o.assumed[key] = a
		}
		return fmt.Sprintf("written %s in %s, held until %v", claim, version, holdUntil), err
	default:
		err := st.Forget("default", claim)
		if err == nil {
			delete(o.assumed, key)
		}
		return "forget " + claim, err
	}
}

// owners are who assumes allocations in the deltas.
var owners = []string{"", "self", "other"}

// compareAssumptions checks what st knows of each claim against the
// objects: the observed claim, the assumption with everything recorded
// of it, and the claims each owner and the holds list.
func (o *objects) compareAssumptions(t *testing.T, st *state.State, when string) {
	t.Helper()
	for i := range 6 {
		key := state.ClaimKey{Namespace: "default", Name: at.Name("c", i)}
		if got, want := st.Observed(key), o.observed[key]; got != want {
			t.Fatalf("%s: observed %s is %v, want %v", when, key, got, want)
		}
		got, ok := st.Assumption(key)
		want, assumed := o.assumed[key]
		if ok != assumed || got != want {
			t.Fatalf("%s: assumption of %s is %+v (%v), want %+v (%v)", when, key, got, ok, want, assumed)
		}
	}
	for _, owner := range owners {
		var want []state.ClaimKey
		for k, a := range o.assumed {
			if a.Owner == owner {
				want = append(want, k)
			}
		}
		if got := st.AssumedBy(owner); fmt.Sprint(got) != fmt.Sprint(sortedKeys(want)) {
			t.Fatalf("%s: assumed by %q: %v, want %v", when, owner, got, sortedKeys(want))
		}
	}
	var held []state.ClaimKey
	for k, a := range o.assumed {
		if !a.HoldUntil.IsZero() {
			held = append(held, k)
		}
	}
	if got := st.OnHold(); fmt.Sprint(got) != fmt.Sprint(sortedKeys(held)) {
		t.Fatalf("%s: on hold: %v, want %v", when, got, sortedKeys(held))
	}
}

func sortedKeys(keys []state.ClaimKey) []state.ClaimKey {
	slices.SortFunc(keys, func(x, y state.ClaimKey) int { return strings.Compare(x.String(), y.String()) })
	return keys
}

// compareWithAllocator checks the snapshot against an allocator built from
// the objects whole (allocator.New over pool.Assemble), which shares none
// of the State's indexes: the pools each node sees and every probe's
// outcome must be the same.
func (o *objects) compareWithAllocator(t *testing.T, w *world, snap *state.Snapshot, when string) {
	t.Helper()
	var sl []*api.ResourceSlice
	for _, s := range o.slices {
		sl = append(sl, s)
	}
	var classes []*resourcev1.DeviceClass
	for _, c := range o.classes {
		classes = append(classes, c)
	}
	var held []*resourcev1.ResourceClaim
	for k, c := range o.observed {
		if a, ok := o.assumed[k]; ok {
			c = a.Claim
		}
		held = append(held, c)
	}
	for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
		opts := options()
		a, err := allocator.New(allocator.Input{Pools: pool.Assemble(sl), Classes: classes, Allocated: held},
			allocator.Options{Strategy: strategy, NewShareID: opts.NewShareID})
		at.Must(t, err)
		for _, n := range w.nodes {
			if strategy == allocator.FirstFit {
				g, gerr := snap.NodePools(n)
				x, xerr := a.NodePools(n)
				if fmt.Sprint(g, gerr) != fmt.Sprint(x, xerr) {
					t.Fatalf("%s: %s sees %v (%v), an allocator over all objects %v (%v)", when, n.Name, g, gerr, x, xerr)
				}
			}
			for i, claims := range probes() {
				g := outcomeOf(snap.Cycle(claims, state.CycleOptions{Strategy: strategy}).Allocate(context.Background(), n))
				x := outcomeOf(a.Allocate(context.Background(), n, claims))
				if g != x {
					t.Fatalf("%s: probe %d (%s) on %s:\n state     %s\n allocator %s", when, i, strategy, n.Name, g, x)
				}
			}
		}
	}
}

// probes are pending claims of one pod each, allocated on every node.
func probes() [][]*resourcev1.ResourceClaim {
	return [][]*resourcev1.ResourceClaim{
		{pending("probe-1")},
		{at.Claim("probe-2").Request(at.Request("gpu", "gpu").Count(2)).MatchAttribute(driver + "/numa").Obj()},
		{at.Claim("probe-3").Request(at.Request("gpu", "gpu").All()).Obj()},
		{pending("probe-4"), at.Claim("probe-5").Request(at.Request("gpu", "gpu").Selector(`device.attributes["` + driver + `"].kind == "nic"`)).Obj()},
	}
}

func compare(t *testing.T, w *world, got, want *state.Snapshot, when string) {
	t.Helper()
	check := func(what, g, x string) {
		t.Helper()
		if g != x {
			t.Fatalf("%s: %s differs from a state built from scratch:\n got %s\nwant %s", when, what, g, x)
		}
	}
	check("slices", names(got.Slices(), func(s *api.ResourceSlice) string { return s.Name + "@" + s.Spec.Pool.Name }),
		names(want.Slices(), func(s *api.ResourceSlice) string { return s.Name + "@" + s.Spec.Pool.Name }))
	check("classes", names(got.Classes(), classKey), names(want.Classes(), classKey))
	claimKey := func(s *state.Snapshot) func(*resourcev1.ResourceClaim) string {
		return func(c *resourcev1.ResourceClaim) string {
			return fmt.Sprintf("%s assumed=%v %s", c.Name, s.Assumed(state.KeyOf(c)), allocationOf(c))
		}
	}
	check("claims", names(got.Claims(), claimKey(got)), names(want.Claims(), claimKey(want)))
	check("pools", fmt.Sprint(got.Pools()), fmt.Sprint(want.Pools()))
	for _, p := range want.Pools() {
		check("usage of "+p.ID.String(), usageString(got.Usage(p.ID)), usageString(want.Usage(p.ID)))
	}
	for _, n := range w.nodes {
		g, gerr := got.NodePools(n)
		x, xerr := want.NodePools(n)
		check("pools of "+n.Name, fmt.Sprint(g, gerr), fmt.Sprint(x, xerr))
		for i, claims := range probes() {
			for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
				opts := state.CycleOptions{Strategy: strategy}
				check(fmt.Sprintf("probe %d (%s) on %s", i, strategy, n.Name),
					outcomeOf(got.Cycle(claims, opts).Allocate(context.Background(), n)),
					outcomeOf(want.Cycle(claims, opts).Allocate(context.Background(), n)))
			}
		}
	}
}

func names[T any](xs []T, f func(T) string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return strings.Join(out, ", ")
}

func classKey(c *resourcev1.DeviceClass) string {
	return c.Name + ":" + c.Spec.Selectors[0].CEL.Expression
}

func allocationOf(c *resourcev1.ResourceClaim) string {
	if c.Status.Allocation == nil {
		return "pending"
	}
	var ds []string
	for _, r := range c.Status.Allocation.Devices.Results {
		ds = append(ds, r.Pool+"/"+r.Device)
	}
	return strings.Join(ds, "+")
}

func usageString(u *state.PoolUsage) string {
	if u == nil {
		return "<nil>"
	}
	var b strings.Builder
	if u.Invalid != nil {
		b.WriteString("invalid: " + u.Invalid.Error() + "\n")
	}
	for _, d := range u.Devices {
		fmt.Fprintf(&b, "%s/%s %v blocked=%v viewErr=%v\n", d.Slice.Name, d.Device.Name, d.Holders, d.Blocked, d.ViewErr)
	}
	for _, cs := range u.CounterSets {
		for _, c := range cs.Counters {
			fmt.Fprintf(&b, "%s/%s %s of %s\n", cs.Name, c.Name, c.Consumed.String(), c.Capacity.String())
		}
	}
	return b.String()
}

func outcomeOf(res []*resourcev1.AllocationResult, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	b, _ := json.Marshal(res)
	return string(b)
}
