package bench

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/dractl/dractl/conformance/dractlrun"
	"github.com/dractl/dractl/conformance/scenario"
	"github.com/dractl/dractl/conformance/upstream"
	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/state"
)

// Side is one column group of the table: an upstream variant, or dractl
// ("" Upstream).
type Side struct {
	Name     string
	Upstream upstream.Variant
}

// Sides in table order.
var Sides = []Side{
	{"upstream incubating", upstream.Incubating},
	{"upstream experimental", upstream.Experimental},
	{"dractl", ""},
}

// Timeout bounds one op.
var Timeout = 10 * time.Second

// Op does op number i. Ops of one Op value must be called in order from
// one goroutine: each applies the delta the previous one left.
type Op func(ctx context.Context, i int) scenario.Outcome

// NewOp prepares what the side keeps between cycles and returns its op
// for the workload. Upstream keeps nothing but the CEL cache (and, for a
// Filter row, the allocator of the cycle): a cycle is NewAllocator over
// the slices with the allocated state as it is, then Allocate. dractl
// keeps its State: a cycle applies the previous cycle's claim, takes a
// snapshot, prepares the claims and allocates on the node.
func NewOp(w Workload, s Side) (Op, error) {
	sc := w.Scenario
	claims := sc.Claims
	node := func(i int) *corev1.Node { return w.Nodes[i%len(w.Nodes)] }
	if s.Upstream != "" {
		slices, err := sc.V1Slices()
		if err != nil {
			return nil, err
		}
		classes := upstream.NewClassLister(sc.Classes)
		features := upstream.Features(s.Upstream)
		states := [2]structured.AllocatedState{upstream.AllocatedState(sc.Allocated), upstream.AllocatedState(sc.Allocated)}
		if w.Churn != nil {
			states[0] = upstream.AllocatedState(append(slicesClone(sc.Allocated), w.Churn))
		}
		if w.Filter {
			a, err := structured.NewAllocator(context.Background(), features, states[1], classes, slices, upstream.CELCache)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, i int) scenario.Outcome {
				res, err := a.Allocate(ctx, node(i), claims)
				return upstream.Classify(ctx, res, err)
			}, nil
		}
		return func(ctx context.Context, i int) scenario.Outcome {
			a, err := structured.NewAllocator(ctx, features, states[i%2], classes, slices, upstream.CELCache)
			if err != nil {
				return scenario.Outcome{Kind: scenario.Fatal, Err: err}
			}
			res, err := a.Allocate(ctx, node(i), claims)
			return upstream.Classify(ctx, res, err)
		}, nil
	}
	p, err := dractlrun.Prepare(sc)
	if err != nil {
		return nil, err
	}
	if len(w.Nodes) > 1 {
		// A scheduler's State is warm after its first cycle on each node:
		// every pool has its table. Measure that, not the first visits.
		cyc := p.State.Snapshot().Cycle(claims, state.CycleOptions{})
		for _, n := range w.Nodes {
			if _, err := cyc.Allocate(context.Background(), n); err != nil {
				return nil, err
			}
		}
	}
	if w.Filter {
		cyc := p.State.Snapshot().Cycle(claims, state.CycleOptions{})
		return func(ctx context.Context, i int) scenario.Outcome {
			return dractlrun.Classify(ctx, func() ([]*resourcev1.AllocationResult, error) { return cyc.Allocate(ctx, node(i)) }, len(claims))
		}, nil
	}
	delta, err := churnDelta(p.State, w.Churn)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, i int) scenario.Outcome {
		if err := delta(i); err != nil {
			return scenario.Outcome{Kind: scenario.Fatal, Err: err}
		}
		return dractlrun.Classify(ctx, func() ([]*resourcev1.AllocationResult, error) {
			return p.State.Snapshot().Cycle(claims, state.CycleOptions{}).Allocate(ctx, node(i))
		}, len(claims))
	}, nil
}

func slicesClone(cs []*resourcev1.ResourceClaim) []*resourcev1.ResourceClaim { return slices.Clone(cs) }

// churnDelta returns the delta of cycle i: the churn claim allocated on
// even cycles, released on odd ones. The released claim is observed
// first, as a scheduler observes a claim before allocating it.
func churnDelta(st *state.State, churn *resourcev1.ResourceClaim) (func(i int) error, error) {
	if churn == nil {
		return func(int) error { return nil }, nil
	}
	released := churn.DeepCopy()
	released.Status = resourcev1.ResourceClaimStatus{}
	if err := st.SetClaim(released); err != nil {
		return nil, err
	}
	return func(i int) error {
		if i%2 == 0 {
			return st.SetClaim(churn)
		}
		return st.SetClaim(released)
	}, nil
}

// NewDeltaOp returns dractl's per-delta op for the workload: the previous
// cycle's claim applied and a snapshot taken, nothing else. Filter rows
// have no delta (nil).
func NewDeltaOp(w Workload) (Op, error) {
	if w.Filter || w.Churn == nil {
		return nil, nil
	}
	p, err := dractlrun.Prepare(w.Scenario)
	if err != nil {
		return nil, err
	}
	delta, err := churnDelta(p.State, w.Churn)
	if err != nil {
		return nil, err
	}
	return func(_ context.Context, i int) scenario.Outcome {
		if err := delta(i); err != nil {
			return scenario.Outcome{Kind: scenario.Fatal, Err: err}
		}
		p.State.Snapshot()
		return scenario.Outcome{Kind: scenario.Fit}
	}, nil
}

// SliceUpdate is a per-delta row: on a cluster of nodes 8×H100 nodes, a
// driver republishes one node's device slice (a new object with a new
// resourceVersion, nodes in turn) and a snapshot is taken. With filter,
// the op also runs Filter on that node, which rebuilds the device table
// the update dropped.
func SliceUpdate(nodes int, filter bool) (string, Op, error) {
	w := H100Cluster(nodes, true)
	p, err := dractlrun.Prepare(w.Scenario)
	if err != nil {
		return "", nil, err
	}
	const turn = 16 // nodes republishing in turn
	var orig, next []*api.ResourceSlice
	for _, s := range w.Scenario.Slices {
		if len(s.Spec.Devices) > 0 && len(orig) < turn {
			c := s.DeepCopy()
			c.ResourceVersion = "2"
			orig, next = append(orig, s), append(next, c)
		}
	}
	cyc := p.State.Snapshot().Cycle(w.Scenario.Claims, state.CycleOptions{})
	name := fmt.Sprintf("slice update on a %d-node cluster", nodes)
	if filter {
		name += ", then Filter on its node"
	}
	return name, func(ctx context.Context, i int) scenario.Outcome {
		k := i % len(orig)
		s := orig[k]
		if (i/len(orig))%2 == 0 {
			s = next[k]
		}
		if err := p.State.SetMixinSlice(s); err != nil {
			return scenario.Outcome{Kind: scenario.Fatal, Err: err}
		}
		snap := p.State.Snapshot()
		if !filter {
			return scenario.Outcome{Kind: scenario.Fit}
		}
		// The cycle of the next pod sees the new slice.
		cyc = snap.Cycle(w.Scenario.Claims, state.CycleOptions{})
		n := w.Scenario.Node(*s.Spec.NodeName)
		return dractlrun.Classify(ctx, func() ([]*resourcev1.AllocationResult, error) { return cyc.Allocate(ctx, n) }, 1)
	}, nil
}

// Result is the median of the rounds of one op.
type Result struct {
	NsPerOp, AllocsPerOp int64
	Outcome              scenario.Outcome
	// Note explains a missing measurement ("timeout", "n/a").
	Note string
}

// Measure runs the ops in interleaved rounds (round r runs every op for
// per, in order, before round r+1 starts), which spreads the noise of a
// shared machine over all of them alike, and returns each op's median.
// An op whose first call takes longer than long is called once per round,
// with its own deadline of Timeout; the calls of a faster op within one
// round share one.
func Measure(ops []Op, rounds int, per, long time.Duration) []Result {
	if f := flag.Lookup("test.benchtime"); f != nil {
		_ = f.Value.Set(per.String())
	}
	res := make([]Result, len(ops))
	ns := make([][]int64, len(ops))
	allocs := make([][]int64, len(ops))
	next := make([]int, len(ops))
	ctx := context.Background()
	call := func(j int) scenario.Outcome {
		tctx, cancel := context.WithTimeout(ctx, Timeout)
		defer cancel()
		out := ops[j](tctx, next[j])
		next[j]++
		return out
	}
	slow := make([]bool, len(ops))
	for j, op := range ops {
		if op == nil {
			res[j].Note = "—"
			continue
		}
		start := time.Now()
		res[j].Outcome = call(j)
		if d := time.Since(start); d > long {
			slow[j] = true
		}
		if res[j].Outcome.Kind == scenario.Timeout {
			res[j].Note = fmt.Sprintf("timeout (>%s)", Timeout)
		}
		// One more call, so that every op starts its rounds on the same
		// parity of its delta.
		call(j)
	}
	for range rounds {
		for j := range ops {
			if ops[j] == nil || res[j].Note != "" {
				continue
			}
			var r testing.BenchmarkResult
			if slow[j] {
				var m0, m1 runtimeMem
				m0.read()
				start := time.Now()
				call(j)
				r = testing.BenchmarkResult{N: 1, T: time.Since(start)}
				m1.read()
				r.MemAllocs = m1.mallocs - m0.mallocs
			} else {
				r = testing.Benchmark(func(b *testing.B) {
					// One deadline for the run: a timer per op would cost
					// more than a fast op, and no scheduler pays it.
					tctx, cancel := context.WithTimeout(ctx, Timeout)
					defer cancel()
					b.ReportAllocs()
					for range b.N {
						out := ops[j](tctx, next[j])
						next[j]++
						if out.Kind == scenario.Timeout {
							b.Skip("timeout")
						}
					}
				})
			}
			if r.N > 0 {
				ns[j] = append(ns[j], r.NsPerOp())
				allocs[j] = append(allocs[j], int64(r.MemAllocs)/int64(r.N))
			}
		}
	}
	for j := range ops {
		if len(ns[j]) > 0 {
			res[j].NsPerOp, res[j].AllocsPerOp = median(ns[j]), median(allocs[j])
		} else if res[j].Note == "" {
			res[j].Note = "n/a"
		}
	}
	return res
}

func median(xs []int64) int64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
