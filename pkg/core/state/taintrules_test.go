package state_test

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/state"
)

func taintRule(name string, sel resourcev1.DeviceTaintSelector, effect resourcev1.DeviceTaintEffect) *resourcev1.DeviceTaintRule {
	return &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &sel,
			Taint:          resourcev1.DeviceTaint{Key: "example.com/" + name, Effect: effect},
		},
	}
}

// TestTaintRules: a DeviceTaintRule's NoSchedule taint keeps the devices it
// selects (by driver, pool and device, each optional) from claims that do
// not tolerate it, whether it comes before or after the slice, until it is
// deleted or changed; a rule without a selector, or for another driver or
// pool, taints nothing. Only the pools a rule selects in are rebuilt.
func TestTaintRules(t *testing.T) {
	node, slice := gpuNode("node-1")
	_, other := gpuNode("node-2")
	var rules []*resourcev1.DeviceTaintRule
	build := func() *state.State {
		st := state.New(state.Options{})
		for _, r := range rules {
			if err := st.SetTaintRule(r); err != nil {
				t.Fatal(err)
			}
		}
		for _, err := range []error{st.SetSlice(slice), st.SetSlice(other), st.SetClass(gpuClass)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		return st
	}
	gpu0 := taintRule("gpu-0", resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.example.com"), Pool: ptr.To("node-1"), Device: ptr.To("gpu-0")}, resourcev1.DeviceTaintEffectNoSchedule)
	for _, tc := range []struct {
		name  string
		rules []*resourcev1.DeviceTaintRule
		want  []string
	}{
		{"no rule", nil, []string{"node-1/gpu-0", "node-1/gpu-1"}},
		{"one device", []*resourcev1.DeviceTaintRule{gpu0}, []string{"node-1/gpu-1"}},
		{"the pool", []*resourcev1.DeviceTaintRule{taintRule("pool", resourcev1.DeviceTaintSelector{Pool: ptr.To("node-1")}, resourcev1.DeviceTaintEffectNoSchedule)}, nil},
		{"another driver", []*resourcev1.DeviceTaintRule{taintRule("other", resourcev1.DeviceTaintSelector{Driver: ptr.To("other.example.com")}, resourcev1.DeviceTaintEffectNoSchedule)}, []string{"node-1/gpu-0", "node-1/gpu-1"}},
		{"no selector", []*resourcev1.DeviceTaintRule{{ObjectMeta: metav1.ObjectMeta{Name: "none"}, Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "k", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}}, []string{"node-1/gpu-0", "node-1/gpu-1"}},
		{"None effect", []*resourcev1.DeviceTaintRule{taintRule("none", resourcev1.DeviceTaintSelector{Device: ptr.To("gpu-1")}, resourcev1.DeviceTaintEffectNone)}, []string{"node-1/gpu-0", "node-1/gpu-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules = tc.rules
			if got := allocatableOn(t, build(), node); !slices.Equal(got, tc.want) {
				t.Errorf("allocatable %v, want %v", got, tc.want)
			}
		})
	}

	// Deltas on one State: a rule set after the slices, changed, deleted.
	rules = nil
	st := build()
	probe := func(want ...string) {
		t.Helper()
		got := allocatableOn(t, st, node)
		if !slices.Equal(got, want) {
			t.Errorf("allocatable %v, want %v", got, want)
		}
	}
	before := st.Stats().PoolBuilds
	coretest.Must(t, st.SetTaintRule(gpu0))
	if n := st.Stats().PoolBuilds - before; n != 1 {
		t.Errorf("%d pools rebuilt for a rule of one pool, want 1", n)
	}
	probe("node-1/gpu-1")
	moved := gpu0.DeepCopy()
	moved.Spec.DeviceSelector.Device = ptr.To("gpu-1")
	coretest.Must(t, st.SetTaintRule(moved))
	probe("node-1/gpu-0")
	coretest.Must(t, st.DeleteTaintRule("gpu-0"))
	probe("node-1/gpu-0", "node-1/gpu-1")
	var nf *state.NotFoundError
	if err := st.DeleteTaintRule("gpu-0"); !errors.As(err, &nf) {
		t.Errorf("deleting a rule twice: %v", err)
	}
}

// allocatableOn returns the devices of node that claims for one GPU get,
// each taken before the next is asked for; the probing claims are deleted
// afterwards.
func allocatableOn(t *testing.T, st *state.State, node *corev1.Node) []string {
	t.Helper()
	var out []string
	var probes []*resourcev1.ResourceClaim
	defer func() {
		for _, c := range probes {
			coretest.Must(t, st.DeleteClaim(c.Namespace, c.Name))
		}
	}()
	for i := 0; ; i++ {
		claim := gpuClaim("probe-" + string(rune('a'+i)))
		coretest.Must(t, st.SetClaim(claim))
		probes = append(probes, claim)
		res, err := st.Snapshot().Cycle([]*resourcev1.ResourceClaim{claim}, state.CycleOptions{}).Allocate(context.Background(), node)
		var unfit *allocator.UnfitError
		if errors.As(err, &unfit) {
			slices.Sort(out)
			return out
		}
		coretest.Must(t, err)
		out = append(out, devices(res[0])...)
		coretest.Must(t, st.Assume(withAllocation(claim, res[0])))
	}
}

// TestTaintRulesAgainstRebuild: a State that takes rule and slice deltas
// in any order, rebuilding only the pools a rule selects in, lets the same
// devices be allocated as a State built afresh from the rules and slices
// left at the end of each step.
func TestTaintRulesAgainstRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(5055, 1))
	nodes := []string{"node-1", "node-2", "node-3"}
	selectors := []resourcev1.DeviceTaintSelector{
		{},
		{Driver: ptr.To("gpu.example.com")},
		{Driver: ptr.To("other.example.com")},
		{Pool: ptr.To("node-2")},
		{Device: ptr.To("gpu-1")},
		{Pool: ptr.To("node-1"), Device: ptr.To("gpu-0")},
		{Driver: ptr.To("gpu.example.com"), Pool: ptr.To("node-3"), Device: ptr.To("gpu-9")},
	}
	effects := []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNone}
	rules := map[string]*resourcev1.DeviceTaintRule{}
	given := map[string]*resourcev1.ResourceSlice{}
	st := state.New(state.Options{})
	coretest.Must(t, st.SetClass(gpuClass))
	for step := range 200 {
		switch op := rng.IntN(4); {
		case op == 0 && len(rules) > 0:
			name := slices.Sorted(maps.Keys(rules))[rng.IntN(len(rules))]
			delete(rules, name)
			coretest.Must(t, st.DeleteTaintRule(name))
		case op <= 1:
			name := "rule-" + string(rune('a'+rng.IntN(4)))
			r := taintRule(name, selectors[rng.IntN(len(selectors))], effects[rng.IntN(len(effects))])
			rules[name] = r
			coretest.Must(t, st.SetTaintRule(r))
		case op == 2 && len(given) > 0:
			name := slices.Sorted(maps.Keys(given))[rng.IntN(len(given))]
			delete(given, name)
			coretest.Must(t, st.DeleteSlice(name))
		default:
			_, s := gpuNode(nodes[rng.IntN(len(nodes))])
			given[s.Name] = s
			coretest.Must(t, st.SetSlice(s))
		}
		fresh := state.New(state.Options{})
		coretest.Must(t, fresh.SetClass(gpuClass))
		for _, name := range slices.Sorted(maps.Keys(rules)) {
			coretest.Must(t, fresh.SetTaintRule(rules[name]))
		}
		for _, name := range slices.Sorted(maps.Keys(given)) {
			coretest.Must(t, fresh.SetSlice(given[name]))
		}
		for _, n := range nodes {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
			if got, want := allocatableOn(t, st, node), allocatableOn(t, fresh, node); !slices.Equal(got, want) {
				t.Fatalf("step %d, %s: allocatable %v, rebuilt State %v", step, n, got, want)
			}
		}
	}
}
