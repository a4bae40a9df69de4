package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/state"
)

func memoOptions() state.Options {
	opts := options()
	opts.MemoizeNodes = true
	return opts
}

// TestMemoAnswersAsFromScratch applies random deltas to a State that
// remembers answers and asks, after every delta, every probe on every node
// under new claim names, sometimes with a new copy of the Node: each answer
// must be the one a State built from scratch (remembering nothing) gives,
// explanations naming the claims asked about.
func TestMemoAnswersAsFromScratch(t *testing.T) {
	seeds, steps := 4, 200
	if testing.Short() {
		seeds = 2
	}
	var total state.MemoStats
	for seed := range int64(seeds) {
		w := newWorld(100 + seed)
		st := state.New(memoOptions())
		o := newObjects()
		for step := range steps {
			op, _ := w.delta(st, o)
			if _, ok := o.slices["shared-d"]; ok && w.r.Intn(2) == 0 {
				// A pool every node sees turns remembering off: keep it rare.
				at.Must(t, st.DeleteSlice("shared-d"))
				delete(o.slices, "shared-d")
			}
			got, want := st.Snapshot(), o.fromScratch(t).Snapshot()
			for _, n := range w.nodes {
				asked := n
				if w.r.Intn(8) == 0 {
					asked = n.DeepCopy()
				}
				for i, claims := range probes() {
					renamed := make([]*resourcev1.ResourceClaim, len(claims))
					for j, c := range claims {
						c = c.DeepCopy()
						c.Name = fmt.Sprintf("%s-%d", c.Name, step)
						renamed[j] = c
					}
					for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
						opts := state.CycleOptions{Strategy: strategy}
						g := outcomeOf(got.Cycle(renamed, opts).Allocate(context.Background(), asked))
						x := outcomeOf(want.Cycle(renamed, opts).Allocate(context.Background(), asked))
						if g != x {
							t.Fatalf("seed %d, step %d (%s): probe %d (%s) on %s:\n remembered %s\n scratch    %s", seed, step, op, i, strategy, n.Name, g, x)
						}
					}
				}
			}
		}
		ms := st.MemoStats()
		total.Hits += ms.Hits
		total.Misses += ms.Misses
	}
	if total.Hits == 0 || total.Misses == 0 {
		t.Fatalf("memo stats %+v: the deltas should leave some answers standing and change others", total)
	}
}

// TestMemoForgetsWhatChanged follows one node through the changes that
// must and must not keep its answer.
func TestMemoForgetsWhatChanged(t *testing.T) {
	st := state.New(memoOptions())
	partitioned(st, t)
	node := at.Node("node-1")
	ctx := context.Background()
	ask := func(n *corev1.Node, claims ...*resourcev1.ResourceClaim) ([]*resourcev1.AllocationResult, error) {
		return st.Snapshot().Cycle(claims, state.CycleOptions{}).Allocate(ctx, n)
	}
	device := func(res []*resourcev1.AllocationResult, err error) string {
		t.Helper()
		at.Must(t, err)
		return res[0].Devices.Results[0].Device
	}
	step := func(what string, hit bool, f func()) {
		t.Helper()
		before := st.MemoStats()
		f()
		after := st.MemoStats()
		if got := after.Hits > before.Hits; got != hit {
			t.Errorf("%s: remembered %v, want %v (stats %+v → %+v)", what, got, hit, before, after)
		}
	}
	step("first cycle", false, func() { device(ask(node, pending("a"))) })
	step("same spec, another claim", true, func() {
		if got := device(ask(node, pending("b"))); got != "gpu-0" {
			t.Errorf("allocated %s, want gpu-0", got)
		}
	})
	step("a claim holds a device", false, func() {
		at.Must(t, st.SetClaim(allocated("x", "part-0")))
		if got := device(ask(node, pending("c"))); got != "part-1" {
			t.Errorf("allocated %s, want part-1", got)
		}
	})
	// A binding's usual end: the allocation is written as it was assumed.
	at.Must(t, st.SetClaim(pending("z")))
	at.Must(t, st.Assume(allocated("z", "part-1")))
	step("an allocation assumed", false, func() { device(ask(node, pending("c1"))) })
	step("the assumed allocation written as assumed", true, func() {
		at.Must(t, st.SetClaim(allocated("z", "part-1")))
		if got := device(ask(node, pending("c2"))); got != "part-2" {
			t.Errorf("allocated %s, want part-2", got)
		}
	})
	at.Must(t, st.SetClaim(pending("w")))
	at.Must(t, st.Assume(allocated("w", "part-2")))
	device(ask(node, pending("c3")))
	step("an allocation written otherwise than assumed", false, func() {
		at.Must(t, st.SetClaim(allocated("w", "part-3")))
		if got := device(ask(node, pending("c4"))); got != "part-2" {
			t.Errorf("allocated %s, want part-2", got)
		}
	})
	at.Must(t, st.DeleteClaim("default", "z"))
	at.Must(t, st.DeleteClaim("default", "w"))
	step("a new copy of the Node", false, func() { device(ask(node.DeepCopy(), pending("d"))) })
	step("a class changed", false, func() {
		at.Must(t, st.SetClass(at.Class("gpu", `device.driver == "`+driver+`" && true`)))
		device(ask(node, pending("e")))
	})
	step("another spec", false, func() {
		two := at.Claim("f").Request(at.Request("gpu", "gpu").Count(2)).Obj()
		device(ask(node, two))
	})
	// Fill the GPU: the explanation of a remembered failure names the
	// claim asked about.
	at.Must(t, st.SetClaim(allocated("y", "part-1", "part-2", "part-3")))
	step("unfit", false, func() { _, _ = ask(node, pending("g")) })
	step("unfit again", true, func() {
		_, err := ask(node, pending("h"))
		var unfit *allocator.UnfitError
		if !errors.As(err, &unfit) {
			t.Fatalf("got %v, want an UnfitError", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "default/h/") || strings.Contains(msg, "default/g/") {
			t.Errorf("explanation %q should name default/h, not default/g", msg)
		}
	})
}

// TestMemoOff: without Options.MemoizeNodes every call searches.
func TestMemoOff(t *testing.T) {
	st := state.New(options())
	partitioned(st, t)
	for _, name := range []string{"a", "b"} {
		if _, err := st.Snapshot().Cycle([]*resourcev1.ResourceClaim{pending(name)}, state.CycleOptions{}).Allocate(context.Background(), at.Node("node-1")); err != nil {
			t.Fatal(err)
		}
	}
	if ms := st.MemoStats(); ms != (state.MemoStats{}) {
		t.Errorf("memo stats %+v, want none", ms)
	}
}
