package allocator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/pool"
)

// layerScenario is one pod's claims against one cluster, on node-1.
type layerScenario struct {
	env    *env
	claims []*resourcev1.ResourceClaim
}

const scenarioDriver = "gpu.example.com"

// genLayerScenario builds a small cluster where counters, constraints and
// the claim limit bind: a tight partitionable pool (few counters, devices
// of several sizes, some already allocated), sometimes a pool from
// testgen (mixins, taints, per-device node selection, shared devices), and
// one to three claims mixing every request shape the search handles.
func genLayerScenario(r *rand.Rand) layerScenario {
	e := &env{classes: []*resourcev1.DeviceClass{anyClass,
		at.Class("gpu", fmt.Sprintf("device.driver == %q", scenarioDriver))}}
	var allocated []resourcev1.DeviceRequestAllocationResult
	colors := []string{"red", "blue", "green"}
	nGPU := 1 + r.IntN(3)
	cs := at.Slice("counters").Driver(scenarioDriver).Pool("tight").Node("node-1").Count(2)
	ds := at.Slice("devices").Driver(scenarioDriver).Pool("tight").Node("node-1").Count(2)
	for g := range nGPU {
		set := fmt.Sprintf("gpu-%d", g)
		cs.Counters(set, "mem", fmt.Sprint(2+r.IntN(6)), "sm", fmt.Sprint(2+r.IntN(4)))
		for i := range 2 + r.IntN(5) {
			name := fmt.Sprintf("gpu-%d-part-%d", g, i)
			d := at.Device(name).Int("gpu", int64(g)).Int("numa", int64(r.IntN(2))).Str("color", colors[r.IntN(len(colors))])
			if r.IntN(5) > 0 {
				d.Consumes(set, "mem", fmt.Sprint(1+r.IntN(3)), "sm", fmt.Sprint(1+r.IntN(2)))
			}
			if r.IntN(12) == 0 {
				d.Taint("example.com/broken", "", resourcev1.DeviceTaintEffectNoSchedule)
			}
			if r.IntN(12) == 0 {
				d.Multi().Capacity("bw", "4")
			}
			ds.Device(d)
			if r.IntN(6) == 0 {
				allocated = append(allocated, at.Result("old", scenarioDriver, "tight", name))
			}
		}
	}
	e.slices = append(e.slices, cs.Obj(), ds.Obj())
	var claims []*resourcev1.ResourceClaim
	nearLimit := r.IntN(8) == 0
	if nearLimit {
		// A claim whose preferred subrequest leaves too little room for a
		// request two steps later.
		claims = append(claims, at.Claim("near-limit").
			FirstAvailable("r0", at.Request("big", "any").Count(int64(16+r.IntN(8))), at.Request("small", "any")).
			Request(at.Request("r1", "any").Count(int64(1+r.IntN(2)))).
			Request(at.Request("r2", "any").Count(int64(10+r.IntN(8)))).Obj())
	}
	if nearLimit || r.IntN(3) == 0 {
		// Many plain devices: room for requests near the claim limit.
		wide := at.Slice("wide").Driver(scenarioDriver).Pool("wide").Node("node-1")
		for i := range 16 + r.IntN(16) {
			wide.Device(at.Device(fmt.Sprintf("wide-%d", i)).Int("numa", int64(r.IntN(2))).Str("color", colors[r.IntN(len(colors))]))
		}
		e.slices = append(e.slices, wide.Obj())
	}
	if r.IntN(3) == 0 {
		gen := testgen.Pool(rand.New(rand.NewPCG(r.Uint64(), 1)), testgen.Options{Driver: "other.example.com", Pool: "gen", MaxDevices: 8, MaxEntries: 28})
		for _, s := range gen {
			if s.Spec.PerDeviceNodeSelection == nil {
				s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(true)
			}
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				if d.Attributes == nil {
					d.Attributes = map[api.QualifiedName]api.DeviceAttribute{}
				}
				d.Attributes["numa"] = api.DeviceAttribute{IntValue: ptr.To(int64(r.IntN(2)))}
				d.Attributes["color"] = api.DeviceAttribute{StringValue: ptr.To(colors[r.IntN(len(colors))])}
				if r.IntN(8) == 0 {
					allocated = append(allocated, at.Result("old", "other.example.com", "gen", d.Name))
				}
			}
		}
		e.slices = append(e.slices, gen...)
	}
	if len(allocated) > 0 {
		e.allocated = append(e.allocated, at.Claim("old").Allocated(allocated...).Obj())
	}

	for ci := range 1 + r.IntN(3) {
		c := at.Claim(fmt.Sprintf("claim-%d", ci))
		var names []string
		for ri := range 1 + r.IntN(4) {
			name := fmt.Sprintf("r%d", ri)
			names = append(names, name)
			if r.IntN(4) == 0 {
				big := genRequest(r, "big", colors)
				if r.IntN(2) == 0 {
					big.Count(int64(10 + r.IntN(14)))
				}
				c.FirstAvailable(name, big, genRequest(r, "small", colors))
				continue
			}
			req := genRequest(r, name, colors)
			if r.IntN(15) == 0 {
				req.Admin()
			}
			c.Request(req)
		}
		attrs := []string{"numa", "gpu", "color"}
		for range r.IntN(3) {
			attr := "gpu.example.com/" + attrs[r.IntN(len(attrs))]
			var on []string
			if len(names) > 1 && r.IntN(2) == 0 {
				on = names[:1+r.IntN(len(names))]
			}
			if r.IntN(2) == 0 {
				c.MatchAttribute(attr, on...)
			} else {
				c.DistinctAttribute(attr, on...)
			}
		}
		claims = append(claims, c.Obj())
	}
	return layerScenario{env: e, claims: claims}
}

// genRequest is one exact request or subrequest: mostly a few devices,
// sometimes "All", sometimes more than a claim may hold, with selectors
// and derived attributes now and then.
func genRequest(r *rand.Rand, name string, colors []string) *at.RequestBuilder {
	class := []string{"any", "gpu"}[r.IntN(2)]
	req := at.Request(name, class)
	switch n := r.IntN(20); {
	case n == 0:
		req.All()
	case n <= 2:
		req.Count(int64(8 + r.IntN(26))) // up to past the claim limit of 32
	default:
		req.Count(int64(1 + r.IntN(2)))
	}
	switch r.IntN(4) {
	case 0:
		req.Selector(fmt.Sprintf(`device.attributes["gpu.example.com"].color == %q`, colors[r.IntN(len(colors))]))
	case 1:
		req.Selector(`!("numa" in device.attributes["gpu.example.com"]) || device.attributes["gpu.example.com"].numa == 0`)
	}
	if r.IntN(12) == 0 {
		req.Derived("gpu.example.com/numa", `device.attributes["gpu.example.com"].numa`)
	}
	if r.IntN(8) == 0 {
		req.Tolerate("example.com/broken", resourcev1.DeviceTaintEffectNoSchedule)
	}
	return req
}

// layerOutcome is what a caller sees of one Allocate call.
type layerOutcome struct {
	results []*resourcev1.AllocationResult
	err     string
	kind    string
	nodes   int64
}

func allocateWith(t *testing.T, s layerScenario, opts Options) (layerOutcome, bool) {
	t.Helper()
	opts.NewShareID = func() types.UID { return "share" }
	a, err := New(Input{Pools: pool.Assemble(s.env.slices), Classes: s.env.classes, Allocated: s.env.allocated}, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Allocate(context.Background(), at.Node("node-1"), s.claims)
	if errors.Is(err, errStepBudget) {
		return layerOutcome{}, false
	}
	o := layerOutcome{results: res, nodes: a.Stats().SearchNodes}
	var fe *FatalError
	switch {
	case err == nil:
		o.kind = "ok"
	case IsUnfit(err):
		o.kind = "unfit"
	case errors.As(err, &fe):
		o.kind = "fatal"
	default:
		t.Fatalf("unexpected error type %T: %v", err, err)
	}
	if err != nil {
		o.err = err.Error()
	}
	return o, true
}

// TestPrunedEqualsUnpruned: switching any pruning layer off, or all of
// them, changes neither the outcome nor the devices picked, for first-fit
// and best-fit, on generated scenarios; and a layer only ever saves
// search nodes. The step budget bounds the searches without pruning; the
// test requires most scenarios to finish within it and every layer to
// have cut work somewhere, so that it cannot pass by skipping.
func TestPrunedEqualsUnpruned(t *testing.T) {
	scenarios := 300
	if testing.Short() || raceEnabled {
		scenarios = 60
	}
	const budget = 50_000
	variants := []struct {
		name string
		off  layerSet
	}{
		{"first pass", layerFirstPass},
		{"claim limit", layerClaimLimit},
		{"request bound", layerRequestBound},
		{"joint bound", layerJointBound},
		{"infeasible suffix", layerInfeasibleSuffix},
		{"combination bound", layerCombinationBound},
		{"all", allLayers},
	}
	cut := map[string]int{}
	ran, skipped := 0, 0
	kinds := map[string]int{}
	for seed := range uint64(scenarios) {
		for _, strategy := range []Strategy{FirstFit, BestFit} {
			s := genLayerScenario(rand.New(rand.NewPCG(seed, 0x1a7e5)))
			want, ok := allocateWith(t, s, Options{Strategy: strategy, stepBudget: budget})
			if !ok {
				skipped++
				continue
			}
			for _, v := range variants {
				got, ok := allocateWith(t, s, Options{Strategy: strategy, stepBudget: budget, withoutLayers: v.off})
				if !ok {
					skipped++
					continue
				}
				ran++
				if got.kind != want.kind || got.err != want.err || !reflect.DeepEqual(got.results, want.results) {
					t.Fatalf("seed %d, %v, without %s: got %s %q %s, want %s %q %s", seed, strategy, v.name,
						got.kind, got.err, resultDevices(got.results), want.kind, want.err, resultDevices(want.results))
				}
			}
			// Each pruning layer alone on top of the bare core must give
			// the same answer for no more work. (The first pass stays off:
			// its step budget cuts it off at a point that depends on the
			// other layers.)
			base, ok := allocateWith(t, s, Options{Strategy: strategy, stepBudget: budget, withoutLayers: allLayers})
			for _, v := range variants[1 : len(variants)-1] {
				if !ok {
					break
				}
				got, ok := allocateWith(t, s, Options{Strategy: strategy, stepBudget: budget, withoutLayers: allLayers &^ v.off})
				if !ok {
					continue
				}
				if got.kind != want.kind || got.err != want.err || !reflect.DeepEqual(got.results, want.results) {
					t.Fatalf("seed %d, %v, with only %s: got %s %q %s, want %s %q %s", seed, strategy, v.name,
						got.kind, got.err, resultDevices(got.results), want.kind, want.err, resultDevices(want.results))
				}
				switch {
				case got.nodes > base.nodes:
					t.Errorf("seed %d, %v, with only %s: %d search nodes, more than the %d of the bare core", seed, strategy, v.name, got.nodes, base.nodes)
				case got.nodes < base.nodes:
					cut[v.name]++
				}
			}
			kinds[want.kind]++
		}
	}
	t.Logf("%d comparisons, %d over the step budget; outcomes %v; scenarios where a layer saved nodes %v", ran, skipped, kinds, cut)
	if skipped*10 > ran {
		t.Errorf("%d of %d runs over the step budget: the scenarios are too hard to compare", skipped, ran+skipped)
	}
	for _, v := range variants {
		if v.off != layerFirstPass && v.off != allLayers && cut[v.name] == 0 {
			t.Errorf("switching off %s never changed the work done: the scenarios do not exercise it", v.name)
		}
	}
	for _, k := range []string{"ok", "unfit", "fatal"} {
		if kinds[k] == 0 {
			t.Errorf("no scenario ended %s", k)
		}
	}
}

func resultDevices(rs []*resourcev1.AllocationResult) string {
	var out []string
	for _, r := range rs {
		out = append(out, strings.Join(devices(r), ","))
	}
	return "[" + strings.Join(out, " | ") + "]"
}

// coreSnapshot is what the core owns of a search, copied; empty lists are
// nil, whatever array they keep for later.
type coreSnapshot struct {
	used       []uint64
	inUse      []int32
	compat     []compatState
	claimCount []int
	picks      []pick
	shares     map[int32]shareState
	stacks     [][]*attrVal
}

func snapshotCore(core *attempt) coreSnapshot {
	st := &core.st
	s := coreSnapshot{used: copied(st.used), inUse: copied(st.inUse), compat: copied(st.compat),
		claimCount: copied(st.claimCount), picks: copied(st.picks), shares: map[int32]shareState{}}
	for k, v := range st.shares {
		s.shares[k] = shareState{n: v.n, used: maps.Clone(v.used)}
	}
	for _, css := range core.cons {
		for _, cs := range css {
			s.stacks = append(s.stacks, copied(cs.stack))
		}
	}
	return s
}

func copied[T any](s []T) []T { return append([]T(nil), s...) }

// watchedPruner checks, around every question the core asks, that the
// layers leave what the core owns as they found it.
type watchedPruner struct {
	t     *testing.T
	core  *attempt
	inner pruner
	calls *int
}

func (w *watchedPruner) check(what string, ask func()) {
	w.t.Helper()
	before := snapshotCore(w.core)
	ask()
	*w.calls++
	if after := snapshotCore(w.core); !reflect.DeepEqual(before, after) {
		w.t.Fatalf("%s changed the core's state", what)
	}
}

func (w *watchedPruner) start() (err error) {
	w.check("start", func() { err = w.inner.start() })
	return err
}

func (w *watchedPruner) claimDoomed(ri int) (doomed bool) {
	w.check("claimDoomed", func() { doomed = w.inner.claimDoomed(ri) })
	return doomed
}

func (w *watchedPruner) hopeless(ri int) (h bool) {
	w.check("hopeless", func() { h = w.inner.hopeless(ri) })
	return h
}

func (w *watchedPruner) lastStart(al *alternative, order []candidate, pos, need int) (last int) {
	w.check("lastStart", func() { last = w.inner.lastStart(al, order, pos, need) })
	return last
}

// TestPrunerLeavesCoreState: the pruning layers read the core's state
// (counters, devices in use, compatibility groups, picks, shares,
// constraint values) and change none of it, which is what lets the core
// ask them anywhere; and the answers with them watched stay those without.
func TestPrunerLeavesCoreState(t *testing.T) {
	scenarios := 30
	if testing.Short() || raceEnabled {
		scenarios = 10
	}
	calls := 0
	watch := func(core *attempt, p pruner) pruner { return &watchedPruner{t: t, core: core, inner: p, calls: &calls} }
	for seed := range uint64(scenarios) {
		for _, strategy := range []Strategy{FirstFit, BestFit} {
			s := genLayerScenario(rand.New(rand.NewPCG(seed, 0x1a7e5)))
			want, ok := allocateWith(t, s, Options{Strategy: strategy, stepBudget: 50_000})
			if !ok {
				continue
			}
			got, _ := allocateWith(t, s, Options{Strategy: strategy, stepBudget: 50_000, wrapPruner: watch})
			if got.kind != want.kind || got.err != want.err || !reflect.DeepEqual(got.results, want.results) {
				t.Fatalf("seed %d, %v: watched got %s %q, want %s %q", seed, strategy, got.kind, got.err, want.kind, want.err)
			}
		}
	}
	if calls == 0 {
		t.Fatal("the core never asked its layers")
	}
}
