package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/dractl/dractl/conformance/dractlrun"
	"github.com/dractl/dractl/conformance/scenario"
	"github.com/dractl/dractl/conformance/upstream"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/state"
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

// Timeout bounds one node's Filter, on every side and in every op: it is
// kube-scheduler 1.37's default filterTimeout, which both the in-tree
// plugin and dractl's apply to every Filter (DRASchedulerFilterTimeout is
// on by default), so each op pays for its timer as a scheduler does.
var Timeout = 10 * time.Second

// filter runs one node's allocation under its own deadline, as the
// in-tree plugin's Filter does.
func filter[T any](ctx context.Context, allocate func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	return allocate(ctx)
}

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
				res, err := filter(ctx, func(ctx context.Context) ([]resourcev1.AllocationResult, error) {
					return a.Allocate(ctx, node(i), claims)
				})
				return upstream.Classify(ctx, res, err)
			}, nil
		}
		return func(ctx context.Context, i int) scenario.Outcome {
			a, err := structured.NewAllocator(ctx, features, states[i%2], classes, slices, upstream.CELCache)
			if err != nil {
				return scenario.Outcome{Kind: scenario.Fatal, Err: err}
			}
			res, err := filter(ctx, func(ctx context.Context) ([]resourcev1.AllocationResult, error) {
				return a.Allocate(ctx, node(i), claims)
			})
			return upstream.Classify(ctx, res, err)
		}, nil
	}
	stateOpts := dractlrun.Options()
	stateOpts.MemoizeNodes = w.Memoize
	p, err := dractlrun.PrepareWith(sc, stateOpts)
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
	// The Cycle bounds each node's search itself (state.CycleOptions).
	opts := state.CycleOptions{Timeout: Timeout}
	if w.Filter {
		cyc := p.State.Snapshot().Cycle(claims, opts)
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
			return p.State.Snapshot().Cycle(claims, opts).Allocate(ctx, node(i))
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
	opts := state.CycleOptions{Timeout: Timeout}
	cyc := p.State.Snapshot().Cycle(w.Scenario.Claims, opts)
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
		cyc = snap.Cycle(w.Scenario.Claims, opts)
		n := w.Scenario.Node(*s.Spec.NodeName)
		return dractlrun.Classify(ctx, func() ([]*resourcev1.AllocationResult, error) { return cyc.Allocate(ctx, n) }, 1)
	}, nil
}

// Result is the median of the rounds of one op.
type Result struct {
	// NsPerOp is the process's CPU time per op (user and system, every
	// thread: the garbage collector's work is the op's too), which on a
	// shared machine stays put where wall time does not. WallNsPerOp is
	// the wall time.
	NsPerOp, WallNsPerOp, AllocsPerOp int64
	Outcome                           scenario.Outcome
	// Note explains a missing measurement ("timeout", "n/a").
	Note string
}

// Measure runs the ops in interleaved rounds (round r runs every op for
// per, in order, before round r+1 starts), which spreads the noise of a
// shared machine over all of them alike, and returns each op's median.
// Every run starts from a collected heap, so that no op pays for the
// garbage of the one before it and each pays for its own. An op whose
// first call takes longer than long is called once per round.
func Measure(ops []Op, rounds int, per, long time.Duration) []Result {
	res := make([]Result, len(ops))
	cpu := make([][]int64, len(ops))
	wall := make([][]int64, len(ops))
	allocs := make([][]int64, len(ops))
	next := make([]int, len(ops))
	ctx := context.Background()
	// n is the calls per run of each op, found by its first run.
	n := make([]int, len(ops))
	run := func(j, calls int) (time.Duration, time.Duration, uint64, scenario.Outcome) {
		runtime.GC()
		var m0, m1 runtimeMem
		m0.read()
		c0, start := processCPU(), time.Now()
		var out scenario.Outcome
		for range calls {
			out = ops[j](ctx, next[j])
			next[j]++
			if out.Kind == scenario.Timeout || out.Kind == scenario.Fatal {
				break
			}
		}
		w, c := time.Since(start), processCPU()-c0
		m1.read()
		return c, w, m1.mallocs - m0.mallocs, out
	}
	for j, op := range ops {
		if op == nil {
			res[j].Note = "—"
			continue
		}
		start := time.Now()
		res[j].Outcome = ops[j](ctx, next[j])
		next[j]++
		first := time.Since(start)
		if res[j].Outcome.Kind == scenario.Timeout {
			res[j].Note = fmt.Sprintf("timeout (>%s)", Timeout)
			continue
		}
		// One more call, so that every op starts its rounds on the same
		// parity of its delta.
		ops[j](ctx, next[j])
		next[j]++
		n[j] = 1
		if first <= long {
			// Grow the run as testing.B does until it lasts per.
			for {
				_, w, _, _ := run(j, n[j])
				if w >= per || n[j] >= 1e9 {
					break
				}
				grow := int64(per) * int64(n[j]) / max(int64(w), 1)
				n[j] = int(min(max(grow+grow/5, int64(n[j])+1), 100*int64(n[j])))
				// Even, so that a run leaves the delta's parity as it found it.
				n[j] += n[j] % 2
			}
		}
	}
	for range rounds {
		for j := range ops {
			if ops[j] == nil || res[j].Note != "" {
				continue
			}
			c, w, m, out := run(j, n[j])
			if out.Kind == scenario.Timeout {
				res[j].Note = fmt.Sprintf("timeout (>%s)", Timeout)
				continue
			}
			cpu[j] = append(cpu[j], c.Nanoseconds()/int64(n[j]))
			wall[j] = append(wall[j], w.Nanoseconds()/int64(n[j]))
			allocs[j] = append(allocs[j], int64(m)/int64(n[j]))
		}
	}
	for j := range ops {
		if len(cpu[j]) > 0 {
			res[j].NsPerOp, res[j].WallNsPerOp, res[j].AllocsPerOp = median(cpu[j]), median(wall[j]), median(allocs[j])
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
