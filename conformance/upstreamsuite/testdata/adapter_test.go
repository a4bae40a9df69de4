// Package dractl runs the allocator test suite of
// k8s.io/dynamic-resource-allocation against dractl. The suite lives in an
// internal package, so this file is dropped into a temporary copy of that
// module (structured/internal/dractl) by conformance/upstreamsuite; it is
// not compiled as part of the dractl repository. Every case builds a fresh
// Allocator with the case's feature gates.
package dractl

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured/internal"
	"k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/validation"
)

// channel names dractl in the suite's per-variant expectations; none of
// them names it, so the suite's default expectations apply.
const channel internal.AllocatorChannel = "dractl"

// Elapsed is the marker the runner reads: nanoseconds from the factory
// call (building the State) to the end of Allocate.
const elapsedMarker = "DRACTL_ELAPSED_NS="

func TestAllocator(t *testing.T) {
	// The CEL environment is built once per process, as in kube-scheduler;
	// building it is not part of any case.
	if _, err := compiler.CompileSelector("true"); err != nil {
		t.Fatal(err)
	}
	allocatortesting.TestAllocator(t, internal.FeaturesAll, newAllocator)
	allocatortesting.TestLexicographicalAllocator(t, internal.FeaturesAll, newAllocator)
}

// gateSet maps the suite's feature flags to dractl's feature gates, the
// way kube-scheduler maps its gates to the allocator's flags.
func gateSet(f internal.Features) features.Set {
	s := features.All()
	for _, g := range []struct {
		on    bool
		gates []features.Gate
	}{
		{f.AdminAccess, []features.Gate{features.AdminAccess}},
		{f.CompatibilityGroups, []features.Gate{features.DeviceCompatibilityGroups}},
		{f.ConsumableCapacity, []features.Gate{features.ConsumableCapacity}},
		{f.DerivedAttributes, []features.Gate{features.DerivedAttributes}},
		{f.DeviceBindingAndStatus, []features.Gate{features.DeviceBindingConditions, features.ResourceClaimDeviceStatus}},
		{f.DeviceTaints, []features.Gate{features.DeviceTaints}},
		{f.FractionalCapacityRange, []features.Gate{features.FractionalCapacityRange}},
		{f.ListTypeAttributes, []features.Gate{features.ListTypeAttributes}},
		{f.OptionalNodeOperations, []features.Gate{features.OptionalNodeOperations}},
		{f.PartitionableDevices, []features.Gate{features.PartitionableDevices}},
		{f.PrioritizedList, []features.Gate{features.PrioritizedList}},
	} {
		for _, gate := range g.gates {
			s = s.With(gate, g.on)
		}
	}
	return s
}

// stateClaims turns an AllocatedState back into allocated claims, one per
// device entry, the inverse of how kube-scheduler builds the state from
// claims: exclusive devices, shares, and aggregated consumed capacity
// (carried by one more share of the device). What the state holds is the
// release's (stateResults in the release's file beside this one).
func stateClaims(st internal.AllocatedState) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for _, r := range stateResults(st) {
		r.Request = "req"
		out = append(out, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "allocated-state", Name: fmt.Sprintf("claim-%d", len(out))},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{r}},
			}},
		})
	}
	return out
}

func newAllocator(ctx context.Context, f internal.Features, allocated internal.AllocatedState, classes internal.DeviceClassLister,
	slices []*suiteSlice, _ *cel.Cache) (internal.Allocator, error) {
	start := time.Now()
	list, err := classes.List()
	if err != nil {
		return nil, err
	}
	// The suite gives slices of different pools the same name, which a
	// cluster (and so pkg/core/state, which keys slices by name) never holds:
	// the pools are assembled from the list as upstream's allocator takes
	// it.
	in := make([]*api.ResourceSlice, len(slices))
	for i, s := range slices {
		v1, err := toV1(s)
		if err != nil {
			return nil, err
		}
		in[i] = api.FromUpstream(v1)
	}
	a, err := allocator.New(allocator.Input{Pools: pool.Assemble(in), Classes: list, Allocated: stateClaims(allocated)},
		allocator.Options{KubeVersion: validation.KubeVersion{Minor: kubeMinor}, Features: gateSet(f), Compiler: compiler, NewShareID: func() types.UID { return "fixed" }})
	if err != nil {
		return nil, err
	}
	return &adapter{a: a, start: start}, nil
}

// compiler is shared by every case, as kube-scheduler shares its CEL cache.
var compiler = allocator.SharedCompiler()

type adapter struct {
	a     *allocator.Allocator
	start time.Time
}

func (a *adapter) Channel() internal.AllocatorChannel { return channel }

// GetStats reports dractl's search nodes, which are counted in the units of
// upstream's allocateOne calls, for the cases that pin the search work.
func (a *adapter) GetStats() internal.Stats {
	return internal.Stats{NumAllocateOneInvocations: a.a.Stats().SearchNodes}
}

// Allocate answers as upstream does: nil results when the claims do not
// fit, an error wrapping ErrFailedAllocationOnNode when they do not fit
// because of invalid pools or the node cannot be used (*NodeError), any
// other error when allocation must stop.
func (a *adapter) Allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	res, err := a.a.Allocate(ctx, node, claims)
	klog.FromContext(ctx).Info(fmt.Sprintf("%s%d", elapsedMarker, time.Since(a.start).Nanoseconds()))
	var unfit *allocator.UnfitError
	switch {
	case allocator.IsNodeError(err):
		return nil, fmt.Errorf("%w%w", err, internal.ErrFailedAllocationOnNode)
	case errors.As(err, &unfit):
		if len(unfit.Explanation.InvalidPools) > 0 {
			return nil, fmt.Errorf("%w%w", err, internal.ErrFailedAllocationOnNode)
		}
		return nil, nil
	case err != nil:
		return nil, err
	}
	out := make([]resourcev1.AllocationResult, len(res))
	for i, r := range res {
		out[i] = *r
	}
	return out, nil
}
