package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/dractl/dractl/conformance/dractlrun"
	"github.com/dractl/dractl/conformance/scenario"
	"github.com/dractl/dractl/conformance/upstream"
)

// Variant is one column group of the table.
type Variant struct {
	Name string
	// Upstream variant, or "" for dractl.
	Upstream upstream.Variant
	Warm     bool
}

// Variants in table order.
var Variants = []Variant{
	{"upstream stable cold", upstream.Stable, false},
	{"upstream stable warm", upstream.Stable, true},
	{"upstream experimental cold", upstream.Experimental, false},
	{"upstream experimental warm", upstream.Experimental, true},
	{"dractl cold", "", false},
	{"dractl warm", "", true},
}

// Timeout bounds one Allocate call.
var Timeout = 10 * time.Second

// call returns a function doing one scheduling attempt on the i-th node.
// Cold re-creates the allocator from objects every call (as kube-scheduler
// does per scheduling cycle); warm reuses one.
func call(w Workload, v Variant) (func(ctx context.Context, i int) scenario.Outcome, error) {
	sc := w.Scenario
	claims := sc.Claims
	if v.Upstream != "" {
		slices, err := sc.V1Slices()
		if err != nil {
			return nil, err
		}
		state := upstream.AllocatedState(sc.Allocated)
		classes := upstream.NewClassLister(sc.Classes)
		features := upstream.Features(v.Upstream)
		newA := func(ctx context.Context) (structured.Allocator, error) {
			return structured.NewAllocator(ctx, features, state, classes, slices, upstream.CELCache)
		}
		if v.Warm {
			a, err := newA(context.Background())
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, i int) scenario.Outcome {
				res, err := a.Allocate(ctx, w.Nodes[i%len(w.Nodes)], claims)
				return upstream.Classify(ctx, res, err)
			}, nil
		}
		return func(ctx context.Context, i int) scenario.Outcome {
			a, err := newA(ctx)
			if err != nil {
				return scenario.Outcome{Kind: scenario.Fatal, Err: err}
			}
			res, err := a.Allocate(ctx, w.Nodes[i%len(w.Nodes)], claims)
			return upstream.Classify(ctx, res, err)
		}, nil
	}
	if !dractlrun.Available {
		return nil, fmt.Errorf("pkg/allocator not compiled in")
	}
	if v.Warm {
		p, err := dractlrun.Prepare(sc)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, i int) scenario.Outcome {
			return p.Allocate(ctx, w.Nodes[i%len(w.Nodes)], claims)
		}, nil
	}
	return func(ctx context.Context, i int) scenario.Outcome {
		p, err := dractlrun.Prepare(sc)
		if err != nil {
			return scenario.Outcome{Kind: scenario.Fatal, Err: err}
		}
		return p.Allocate(ctx, w.Nodes[i%len(w.Nodes)], claims)
	}, nil
}

// Probe runs one call with Timeout and returns its outcome and duration.
func Probe(w Workload, v Variant) (scenario.Outcome, time.Duration, error) {
	f, err := call(w, v)
	if err != nil {
		return scenario.Outcome{}, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	start := time.Now()
	out := f(ctx, 0)
	return out, time.Since(start), nil
}

// Func is the benchmark body for one workload and variant. Each op is one
// scheduling attempt for one node (round-robin over w.Nodes).
func Func(w Workload, v Variant) func(b *testing.B) {
	return func(b *testing.B) {
		f, err := call(w, v)
		if err != nil {
			b.Skip(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tctx, cancel := context.WithTimeout(ctx, Timeout)
			out := f(tctx, i)
			cancel()
			if out.Kind == scenario.Timeout {
				b.Skipf("timeout after %s", Timeout)
			}
			if out.Kind == scenario.Fatal {
				b.Fatalf("fatal: %v", out.Err)
			}
		}
	}
}

var _ = resourcev1.GroupName
