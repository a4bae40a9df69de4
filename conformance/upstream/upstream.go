// Package upstream runs k8s.io/dynamic-resource-allocation/structured, the
// allocator of kube-scheduler, on a scenario.
package upstream

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/conformance/scenario"
)

// Variant selects the upstream implementation.
type Variant string

const (
	// Experimental is what kube-scheduler 1.37 picks with every DRA feature
	// enabled: FeaturesAll is only a subset of the experimental variant.
	Experimental Variant = "experimental"
	// Incubating is the variant NewAllocator picks for the stable features
	// plus binding conditions and consumable capacity: the implementation
	// that is meant to become stable next.
	Incubating Variant = "incubating"
	// Stable is the variant picked with only the GA-level features
	// (admin access, prioritized list, partitionable devices, taints).
	Stable Variant = "stable"
)

// Features returns the feature set passed to NewAllocator for the variant.
func Features(v Variant) structured.Features {
	switch v {
	case Stable:
		return structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true}
	case Incubating:
		return structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true,
			DeviceBindingAndStatus: true, ConsumableCapacity: true, FractionalCapacityRange: true}
	}
	return structured.Features{
		AdminAccess: true, CompatibilityGroups: true, ConsumableCapacity: true, DerivedAttributes: true,
		DeviceBindingAndStatus: true, DeviceTaints: true, FractionalCapacityRange: true,
		ListTypeAttributes: true, OptionalNodeOperations: true, PartitionableDevices: true, PrioritizedList: true,
	}
}

// CELCache is shared by all runs, like the scheduler's.
var CELCache = cel.NewCache(1000, cel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})

// ClassLister serves DeviceClasses from memory.
type ClassLister map[string]*resourcev1.DeviceClass

func NewClassLister(classes []*resourcev1.DeviceClass) ClassLister {
	l := make(ClassLister, len(classes))
	for _, c := range classes {
		l[c.Name] = c
	}
	return l
}

func (l ClassLister) List() ([]*resourcev1.DeviceClass, error) {
	out := make([]*resourcev1.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l ClassLister) Get(name string) (*resourcev1.DeviceClass, error) {
	c, ok := l[name]
	if !ok {
		return nil, fmt.Errorf("deviceclass %q not found", name)
	}
	return c, nil
}

// AllocatedState gathers the allocated devices of claims the way
// kube-scheduler's DRA plugin does: admin-access results do not count,
// results with a share ID count as shared with their consumed capacity.
func AllocatedState(claims []*resourcev1.ResourceClaim) structured.AllocatedState {
	st := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID == nil {
				st.AllocatedDevices.Insert(id)
				continue
			}
			st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		}
	}
	return st
}

// Prepared is a scenario converted for upstream, reusable across nodes.
type Prepared struct {
	Variant   Variant
	Slices    []*resourcev1.ResourceSlice
	Allocator structured.Allocator
}

// Prepare converts the scenario (flattening mixins) and builds an allocator.
func Prepare(ctx context.Context, v Variant, s *scenario.Scenario) (*Prepared, error) {
	slices, err := s.V1Slices()
	if err != nil {
		return nil, err
	}
	a, err := structured.NewAllocator(ctx, Features(v), AllocatedState(s.Allocated), NewClassLister(s.Classes), slices, CELCache)
	if err != nil {
		return nil, err
	}
	return &Prepared{Variant: v, Slices: slices, Allocator: a}, nil
}

// Allocate runs one scheduling attempt for the node and classifies it the way
// kube-scheduler does: no result or ErrFailedAllocationOnNode means "does not
// fit this node"; any other error aborts scheduling (fatal).
func (p *Prepared) Allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) scenario.Outcome {
	res, err := p.Allocator.Allocate(ctx, node, claims)
	return Classify(ctx, res, err)
}

// Classify maps upstream's return values to an Outcome.
func Classify(ctx context.Context, res []resourcev1.AllocationResult, err error) scenario.Outcome {
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || ctx.Err() != nil):
		return scenario.Outcome{Kind: scenario.Timeout, Err: err}
	case err != nil && errors.Is(err, structured.ErrFailedAllocationOnNode):
		return scenario.Outcome{Kind: scenario.Unfit, Err: err}
	case err != nil:
		return scenario.Outcome{Kind: scenario.Fatal, Err: err}
	case res == nil:
		return scenario.Outcome{Kind: scenario.Unfit}
	}
	out := make([]*resourcev1.AllocationResult, len(res))
	for i := range res {
		out[i] = &res[i]
	}
	return scenario.Outcome{Kind: scenario.Fit, Results: out}
}
