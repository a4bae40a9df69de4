package simulate

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/decode"
)

// exampleDGX reads examples/dgx-h100-mixins: its node as a template, its
// DeviceClasses as an empty cluster's, and its workload.
func exampleDGX(t testing.TB) (*Cluster, *Template, *Stream) {
	t.Helper()
	dir := filepath.Join("..", "..", "examples", "dgx-h100-mixins")
	objs, err := decode.Paths([]string{filepath.Join(dir, "resourceslices.yaml"), filepath.Join(dir, "deviceclasses.yaml"), filepath.Join(dir, "node.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := decode.Group(objs)
	tmpl, err := NewTemplate(set.Nodes[0], set.Slices)
	if err != nil {
		t.Fatal(err)
	}
	wobjs, err := decode.Paths([]string{filepath.Join(dir, "workload")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Cluster{Classes: set.Classes}, tmpl, mustStream(t, decode.Group(wobjs))
}

// TestNodesNeededIsMinimal: the answer for the example workload keeps the
// p99 wait within the bound, and one node fewer breaks it, each checked
// by a run of its own on a cluster built afresh.
func TestNodesNeededIsMinimal(t *testing.T) {
	base, tmpl, s := exampleDGX(t)
	for _, bound := range []time.Duration{time.Minute, 5 * time.Minute, time.Hour} {
		for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
			plan, err := NodesNeeded(context.Background(), base, tmpl, s, PlanOptions{MaxWait: bound, Run: Options{Strategy: strategy, Samples: 10}})
			if err != nil {
				t.Fatal(err)
			}
			if !plan.Found || plan.Nodes < 2 {
				t.Fatalf("%s within %v: %d nodes (found %v); the example needs more than one node", plan.Strategy, bound, plan.Nodes, plan.Found)
			}
			p99 := func(n int) Wait {
				c, err := (&Template{Node: tmpl.Node, Slices: tmpl.Slices}).with(base, n)
				if err != nil {
					t.Fatal(err)
				}
				res, err := Run(context.Background(), c, s, Options{Strategy: strategy, Samples: 10})
				if err != nil {
					t.Fatal(err)
				}
				return res.Wait.P99
			}
			if w := p99(plan.Nodes); !within(w, bound) || w != plan.P99 {
				t.Errorf("%s: with %d nodes p99 is %v, bound %v, the plan says %v", plan.Strategy, plan.Nodes, w, bound, plan.P99)
			}
			if w := p99(plan.Nodes - 1); within(w, bound) || plan.Fewer == nil || w != *plan.Fewer {
				t.Errorf("%s: with %d nodes (one fewer) p99 is %v, within %v; the plan says %v", plan.Strategy, plan.Nodes-1, w, bound, plan.Fewer)
			}
			t.Logf("%s within %v: %d nodes, p99 %v, one fewer %v, %d runs", plan.Strategy, bound, plan.Nodes, plan.P99, *plan.Fewer, len(plan.Curve))
		}
	}
}

// TestNodesNeededAddsToACluster: template nodes come after the cluster's
// own, and a cluster that is already enough needs none.
func TestNodesNeededAddsToACluster(t *testing.T) {
	base, tmpl, s := exampleDGX(t)
	alone, err := NodesNeeded(context.Background(), base, tmpl, s, PlanOptions{MaxWait: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	big, err := tmpl.with(base, alone.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	// The copies are renamed again as a new template's: plan-1-plan-1.
	other, err := NewTemplate(nil, tmpl.copy(1).slices)
	if err != nil {
		t.Fatal(err)
	}
	enough, err := NodesNeeded(context.Background(), big, other, s, PlanOptions{MaxWait: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if enough.Nodes != 0 || !enough.Found {
		t.Errorf("a cluster of %d template nodes needs %d more (found %v)", alone.Nodes, enough.Nodes, enough.Found)
	}
	half, err := tmpl.with(base, alone.Nodes/2)
	if err != nil {
		t.Fatal(err)
	}
	more, err := NodesNeeded(context.Background(), half, other, s, PlanOptions{MaxWait: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if more.Nodes == 0 || more.Nodes > alone.Nodes-alone.Nodes/2 {
		t.Errorf("a cluster of %d template nodes needs %d more; alone the workload needs %d", alone.Nodes/2, more.Nodes, alone.Nodes)
	}
}

func TestNewTemplateRejectsSharedSlices(t *testing.T) {
	_, tmpl, _ := exampleDGX(t)
	s := tmpl.Slices[0].DeepCopy()
	s.Spec.NodeName = nil
	if _, err := NewTemplate(nil, append(tmpl.Slices[1:], s)); err == nil {
		t.Error("a slice without spec.nodeName was accepted in a template")
	}
	other := tmpl.Slices[0].DeepCopy()
	name := "elsewhere"
	other.Spec.NodeName = &name
	if _, err := NewTemplate(nil, append(tmpl.Slices[1:], other)); err == nil {
		t.Error("slices of two nodes were accepted as one template")
	}
}

// TestSplitNeverFitting: of a workload some of whose kinds ask for what no
// DGX H100 has (an A100 profile, sixteen GPUs), those pods are taken out
// by kind and the others kept in order; each pod kept is placed alone on
// one empty template node and each taken out is not, every pod checked by
// a run of its own. The rest is then sized.
func TestSplitNeverFitting(t *testing.T) {
	base, tmpl, _ := exampleDGX(t)
	objs, err := decode.Paths([]string{filepath.Join("..", "cli", "testdata", "simulate", "foreign-profiles.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := mustStream(t, decode.Group(objs))
	kept, never, err := SplitNeverFitting(context.Background(), base, tmpl, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	removed := map[string]int{}
	for _, g := range never {
		removed[g.Group] = g.Pods
	}
	if len(never) != 2 || removed["a100-1g-5gb"] == 0 || removed["sixteen-gpus"] == 0 {
		t.Fatalf("never fitting: %+v, want the kinds a100-1g-5gb and sixteen-gpus", never)
	}
	if len(kept.Pods)+removed["a100-1g-5gb"]+removed["sixteen-gpus"] != len(s.Pods) {
		t.Errorf("%d kept and %v taken out of %d pods", len(kept.Pods), removed, len(s.Pods))
	}
	c, err := tmpl.with(base, 1)
	if err != nil {
		t.Fatal(err)
	}
	isKept := map[string]bool{}
	for _, p := range kept.Pods {
		isKept[p.Name.String()] = true
	}
	for _, p := range s.Pods {
		alone := p
		alone.Arrive, alone.Lifetime = 0, 0
		res, err := Run(context.Background(), c, &Stream{Pods: []Pod{alone}}, Options{Samples: 1})
		if err != nil {
			t.Fatal(err)
		}
		if fits := res.Placed == 1; fits != isKept[p.Name.String()] {
			t.Errorf("pod %s (%s): fits alone %v, kept %v", p.Name, p.Kind, fits, isKept[p.Name.String()])
		}
	}
	plan, err := NodesNeeded(context.Background(), base, tmpl, kept, PlanOptions{MaxWait: 5 * time.Minute, MaxNodes: 64, Run: Options{Samples: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Found {
		t.Errorf("the pods that fit are not sized: %+v", plan)
	}
}
