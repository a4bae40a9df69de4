//go:build !noallocator

// Package dractlrun runs dractl on a scenario the way the scheduler does:
// the scenario's objects are fed to a pkg/core/state State as deltas, and each
// node is one Allocate of a Cycle on its snapshot.
package dractlrun

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/conformance/scenario"
	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/state"
)

// SharedCompiler compiles selectors with pkg/core/cel's process-wide compiler
// and cache, as kube-scheduler shares its CEL cache across cycles.
var SharedCompiler = allocator.SharedCompiler()

// Available reports whether pkg/core/allocator was compiled in.
const Available = true

// Prepared is the State of one scenario and its snapshot.
type Prepared struct {
	State    *state.State
	Snapshot *state.Snapshot
}

// Options are the State options of every scenario: the shared compiler
// and share IDs numbered in allocation order, so that results compare.
func Options() state.Options {
	var n atomic.Int64
	return state.Options{
		Compiler: SharedCompiler,
		NewShareID: func() types.UID {
			return types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012d", n.Add(1)))
		},
	}
}

// Prepare feeds the scenario's slices (as written, with mixins), classes
// and allocated claims to a new State. A cluster holds one slice per name,
// so a scenario that names two slices alike cannot be a cluster and is
// refused.
func Prepare(s *scenario.Scenario) (*Prepared, error) {
	return PrepareWith(s, Options())
}

// PrepareWith is Prepare with the State's options.
func PrepareWith(s *scenario.Scenario, opts state.Options) (*Prepared, error) {
	st := state.New(opts)
	seen := map[string]bool{}
	for _, sl := range s.Slices {
		if seen[sl.Name] {
			return nil, fmt.Errorf("two ResourceSlices are named %s", sl.Name)
		}
		seen[sl.Name] = true
		if err := st.SetMixinSlice(sl); err != nil {
			return nil, err
		}
	}
	for _, c := range s.Classes {
		if err := st.SetClass(c); err != nil {
			return nil, err
		}
	}
	for _, c := range s.Allocated {
		if err := st.SetClaim(c); err != nil {
			return nil, err
		}
	}
	return &Prepared{State: st, Snapshot: st.Snapshot()}, nil
}

// Allocate runs dractl for one node and classifies the answer.
func (p *Prepared) Allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) scenario.Outcome {
	return Classify(ctx, func() ([]*resourcev1.AllocationResult, error) {
		return p.Snapshot.Cycle(claims, state.CycleOptions{}).Allocate(ctx, node)
	}, len(claims))
}

// Classify runs allocate and classifies its answer for n claims; a panic
// is a fatal outcome.
func Classify(ctx context.Context, allocate func() ([]*resourcev1.AllocationResult, error), n int) (out scenario.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = scenario.Outcome{Kind: scenario.Fatal, Err: fmt.Errorf("PANIC: %v", r)}
		}
	}()
	res, err := allocate()
	if err != nil {
		return classifyErr(ctx, err)
	}
	if len(res) != n {
		return scenario.Outcome{Kind: scenario.Fatal, Err: fmt.Errorf("%d results for %d claims without error", len(res), n)}
	}
	return scenario.Outcome{Kind: scenario.Fit, Results: res}
}

// classifyErr maps a failed Allocate to an Outcome. It is apart from
// Classify so that a benchmarked cycle that fits does not pay for the
// targets errors.As needs on the heap.
func classifyErr(ctx context.Context, err error) scenario.Outcome {
	var unfit *allocator.UnfitError
	var fatal *allocator.FatalError
	switch {
	case ctx.Err() != nil:
		return scenario.Outcome{Kind: scenario.Timeout, Err: err}
	case errors.As(err, &unfit):
		return scenario.Outcome{Kind: scenario.Unfit, Err: err}
	case errors.As(err, &fatal):
		return scenario.Outcome{Kind: scenario.Fatal, Err: err}
	}
	return scenario.Outcome{Kind: scenario.Fatal, Err: fmt.Errorf("neither UnfitError nor FatalError: %w", err)}
}
