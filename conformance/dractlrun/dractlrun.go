//go:build !noallocator

// Package dractlrun runs dractl's allocator on a scenario.
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
	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/pool"
)

// SharedCompiler compiles selectors with pkg/cel's process-wide compiler
// and cache, as kube-scheduler shares its CEL cache across cycles.
var SharedCompiler = allocator.SharedCompiler()

// Available reports whether pkg/allocator was compiled in.
const Available = true

// Prepared is dractl's allocator for one scenario.
type Prepared struct {
	Allocator *allocator.Allocator
}

// Prepare assembles pools from the scenario's slices (as written, with
// mixins) and builds a first-fit allocator.
func Prepare(s *scenario.Scenario) (*Prepared, error) {
	var n atomic.Int64
	a, err := allocator.New(allocator.Input{
		Pools:     pool.Assemble(s.Slices),
		Classes:   s.Classes,
		Allocated: s.Allocated,
	}, allocator.Options{
		Strategy: allocator.FirstFit,
		Compiler: SharedCompiler,
		NewShareID: func() types.UID {
			return types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012d", n.Add(1)))
		},
	})
	if err != nil {
		return nil, err
	}
	return &Prepared{Allocator: a}, nil
}

// Allocate runs dractl for one node and classifies the answer.
func (p *Prepared) Allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) (out scenario.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = scenario.Outcome{Kind: scenario.Fatal, Err: fmt.Errorf("PANIC: %v", r)}
		}
	}()
	res, err := p.Allocator.Allocate(ctx, node, claims)
	var unfit *allocator.UnfitError
	var fatal *allocator.FatalError
	switch {
	case err != nil && ctx.Err() != nil:
		return scenario.Outcome{Kind: scenario.Timeout, Err: err}
	case errors.As(err, &unfit):
		return scenario.Outcome{Kind: scenario.Unfit, Err: err}
	case errors.As(err, &fatal):
		return scenario.Outcome{Kind: scenario.Fatal, Err: err}
	case err != nil:
		return scenario.Outcome{Kind: scenario.Fatal, Err: fmt.Errorf("neither UnfitError nor FatalError: %w", err)}
	case len(res) != len(claims):
		return scenario.Outcome{Kind: scenario.Fatal, Err: fmt.Errorf("%d results for %d claims without error", len(res), len(claims))}
	}
	return scenario.Outcome{Kind: scenario.Fit, Results: res}
}
