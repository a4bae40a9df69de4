// Package coretest is the core side's one package of test builders:
// fluent builders of slices, devices, classes, claims (allocated ones
// too) and nodes, and the small helpers every test of the core, and of the
// sides built on it, would otherwise write again (Must, CPUTime).
package coretest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

// SliceBuilder builds an api.ResourceSlice.
type SliceBuilder struct{ s *api.ResourceSlice }

// Slice starts a slice in pool "pool" of driver "driver.example.com",
// generation 1, one slice per pool.
func Slice(name string) *SliceBuilder {
	return &SliceBuilder{s: &api.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.ResourceSliceSpec{Driver: "driver.example.com",
			Pool: api.ResourcePool{Name: "pool", Generation: 1, ResourceSliceCount: 1}},
	}}
}

func (b *SliceBuilder) Driver(d string) *SliceBuilder { b.s.Spec.Driver = d; return b }
func (b *SliceBuilder) Pool(p string) *SliceBuilder   { b.s.Spec.Pool.Name = p; return b }
func (b *SliceBuilder) Generation(g int64) *SliceBuilder {
	b.s.Spec.Pool.Generation = g
	return b
}
func (b *SliceBuilder) Count(n int64) *SliceBuilder { b.s.Spec.Pool.ResourceSliceCount = n; return b }
func (b *SliceBuilder) Node(n string) *SliceBuilder { b.s.Spec.NodeName = ptr.To(n); return b }
func (b *SliceBuilder) AllNodes() *SliceBuilder     { b.s.Spec.AllNodes = ptr.To(true); return b }
func (b *SliceBuilder) NodeSelector(key string, values ...string) *SliceBuilder {
	b.s.Spec.NodeSelector = Selector(key, values...)
	return b
}
func (b *SliceBuilder) PerDeviceNodeSelection() *SliceBuilder {
	b.s.Spec.PerDeviceNodeSelection = ptr.To(true)
	return b
}
func (b *SliceBuilder) SkipNodeOperations(ops ...resourcev1.SkipNodeOperation) *SliceBuilder {
	b.s.Spec.SkipNodeOperations = ops
	return b
}

// Device appends devices.
func (b *SliceBuilder) Device(ds ...*DeviceBuilder) *SliceBuilder {
	for _, d := range ds {
		b.s.Spec.Devices = append(b.s.Spec.Devices, *d.d)
	}
	return b
}

// Counters appends a counter set; counters are name, quantity pairs.
func (b *SliceBuilder) Counters(set string, kv ...string) *SliceBuilder {
	b.s.Spec.SharedCounters = append(b.s.Spec.SharedCounters, api.CounterSet{Name: set, Counters: counters(kv)})
	return b
}

// CounterSetWithIncludes appends a counter set that includes mixins.
func (b *SliceBuilder) CounterSetWithIncludes(set string, includes []string, kv ...string) *SliceBuilder {
	b.s.Spec.SharedCounters = append(b.s.Spec.SharedCounters, api.CounterSet{Name: set, Counters: counters(kv), Includes: includes})
	return b
}

func (b *SliceBuilder) mixins() *api.ResourceSliceMixins {
	if b.s.Spec.Mixins == nil {
		b.s.Spec.Mixins = &api.ResourceSliceMixins{}
	}
	return b.s.Spec.Mixins
}

// CounterSetMixin defines a counter set mixin.
func (b *SliceBuilder) CounterSetMixin(name string, kv ...string) *SliceBuilder {
	m := b.mixins()
	m.CounterSet = append(m.CounterSet, api.CounterSetMixin{Name: name, Counters: counters(kv)})
	return b
}

// ConsumptionMixin defines a device counter consumption mixin.
func (b *SliceBuilder) ConsumptionMixin(name string, kv ...string) *SliceBuilder {
	m := b.mixins()
	m.DeviceCounterConsumption = append(m.DeviceCounterConsumption, api.DeviceCounterConsumptionMixin{Name: name, Counters: counters(kv)})
	return b
}

// DeviceMixin defines a device mixin with string attributes (key, value pairs).
func (b *SliceBuilder) DeviceMixin(name string, kv ...string) *SliceBuilder {
	m := b.mixins()
	dm := api.DeviceMixin{Name: name, Attributes: map[api.QualifiedName]api.DeviceAttribute{}}
	for i := 0; i+1 < len(kv); i += 2 {
		dm.Attributes[api.QualifiedName(kv[i])] = api.DeviceAttribute{StringValue: ptr.To(kv[i+1])}
	}
	m.Device = append(m.Device, dm)
	return b
}

// Obj returns the slice.
func (b *SliceBuilder) Obj() *api.ResourceSlice { return b.s }

func counters(kv []string) map[string]api.Counter {
	if len(kv)%2 != 0 {
		panic("counters need name, quantity pairs")
	}
	m := map[string]api.Counter{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = api.Counter{Value: resource.MustParse(kv[i+1])}
	}
	return m
}

// DeviceBuilder builds an api.Device.
type DeviceBuilder struct{ d *api.Device }

// Device starts a device.
func Device(name string) *DeviceBuilder { return &DeviceBuilder{d: &api.Device{Name: name}} }

func (b *DeviceBuilder) attrs() map[api.QualifiedName]api.DeviceAttribute {
	if b.d.Attributes == nil {
		b.d.Attributes = map[api.QualifiedName]api.DeviceAttribute{}
	}
	return b.d.Attributes
}
func (b *DeviceBuilder) Str(k, v string) *DeviceBuilder {
	b.attrs()[api.QualifiedName(k)] = api.DeviceAttribute{StringValue: ptr.To(v)}
	return b
}

// NoValue adds an attribute with no value set, which admission rejects
// but an in-memory caller can still hand over.
func (b *DeviceBuilder) NoValue(k string) *DeviceBuilder {
	b.attrs()[api.QualifiedName(k)] = api.DeviceAttribute{}
	return b
}
func (b *DeviceBuilder) Int(k string, v int64) *DeviceBuilder {
	b.attrs()[api.QualifiedName(k)] = api.DeviceAttribute{IntValue: ptr.To(v)}
	return b
}
func (b *DeviceBuilder) Bool(k string, v bool) *DeviceBuilder {
	b.attrs()[api.QualifiedName(k)] = api.DeviceAttribute{BoolValue: ptr.To(v)}
	return b
}
func (b *DeviceBuilder) Strs(k string, v ...string) *DeviceBuilder {
	b.attrs()[api.QualifiedName(k)] = api.DeviceAttribute{StringValues: v}
	return b
}
func (b *DeviceBuilder) Capacity(k, v string) *DeviceBuilder {
	return b.CapacityPolicy(k, v, nil)
}
func (b *DeviceBuilder) CapacityPolicy(k, v string, p *resourcev1.CapacityRequestPolicy) *DeviceBuilder {
	if b.d.Capacity == nil {
		b.d.Capacity = map[api.QualifiedName]api.DeviceCapacity{}
	}
	b.d.Capacity[api.QualifiedName(k)] = api.DeviceCapacity{Value: resource.MustParse(v), RequestPolicy: p}
	return b
}

// Consumes adds a counter consumption (name, quantity pairs).
func (b *DeviceBuilder) Consumes(set string, kv ...string) *DeviceBuilder {
	b.d.ConsumesCounters = append(b.d.ConsumesCounters, api.DeviceCounterConsumption{CounterSet: set, Counters: counters(kv)})
	return b
}

// ConsumesGroups adds a counter consumption with compatibility groups.
func (b *DeviceBuilder) ConsumesGroups(set string, groups []string, kv ...string) *DeviceBuilder {
	b.d.ConsumesCounters = append(b.d.ConsumesCounters, api.DeviceCounterConsumption{CounterSet: set, Counters: counters(kv), CompatibilityGroups: groups})
	return b
}

// ConsumesIncludes adds a counter consumption built from mixins.
func (b *DeviceBuilder) ConsumesIncludes(set string, includes ...string) *DeviceBuilder {
	b.d.ConsumesCounters = append(b.d.ConsumesCounters, api.DeviceCounterConsumption{CounterSet: set, Includes: includes})
	return b
}
func (b *DeviceBuilder) Includes(names ...string) *DeviceBuilder {
	b.d.Includes = append(b.d.Includes, names...)
	return b
}
func (b *DeviceBuilder) Node(n string) *DeviceBuilder { b.d.NodeName = ptr.To(n); return b }
func (b *DeviceBuilder) AllNodes() *DeviceBuilder     { b.d.AllNodes = ptr.To(true); return b }
func (b *DeviceBuilder) NodeSelector(key string, values ...string) *DeviceBuilder {
	b.d.NodeSelector = Selector(key, values...)
	return b
}
func (b *DeviceBuilder) Taint(key, value string, effect resourcev1.DeviceTaintEffect) *DeviceBuilder {
	b.d.Taints = append(b.d.Taints, api.DeviceTaint{Key: key, Value: value, Effect: effect})
	return b
}

// NodeResource declares that the device stands for node resource name
// (KEP-5517).
func (b *DeviceBuilder) NodeResource(name corev1.ResourceName, r resourcev1.NodeAllocatableResource) *DeviceBuilder {
	if b.d.NodeAllocatableResources == nil {
		b.d.NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{}
	}
	b.d.NodeAllocatableResources[name] = r
	return b
}

func (b *DeviceBuilder) Multi() *DeviceBuilder       { b.d.AllowMultipleAllocations = ptr.To(true); return b }
func (b *DeviceBuilder) BindsToNode() *DeviceBuilder { b.d.BindsToNode = ptr.To(true); return b }
func (b *DeviceBuilder) BindingConditions(c ...string) *DeviceBuilder {
	b.d.BindingConditions = c
	b.d.BindingFailureConditions = []string{"failed"}
	return b
}

// Selector is a one-term node selector "key in values".
func Selector(key string, values ...string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}},
	}}}
}

// Class builds a DeviceClass with CEL selectors.
func Class(name string, exprs ...string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range exprs {
		c.Spec.Selectors = append(c.Spec.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return c
}

// ClaimBuilder builds a ResourceClaim.
type ClaimBuilder struct{ c *resourcev1.ResourceClaim }

// Claim starts a claim in namespace "default".
func Claim(name string) *ClaimBuilder {
	return &ClaimBuilder{c: &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}}
}

// Request adds an exact request.
func (b *ClaimBuilder) Request(r *RequestBuilder) *ClaimBuilder {
	b.c.Spec.Devices.Requests = append(b.c.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: r.name, Exactly: &r.r})
	return b
}

// FirstAvailable adds a request with subrequests in preference order.
func (b *ClaimBuilder) FirstAvailable(name string, subs ...*RequestBuilder) *ClaimBuilder {
	req := resourcev1.DeviceRequest{Name: name}
	for _, s := range subs {
		req.FirstAvailable = append(req.FirstAvailable, resourcev1.DeviceSubRequest{
			Name: s.name, DeviceClassName: s.r.DeviceClassName, Selectors: s.r.Selectors,
			AllocationMode: s.r.AllocationMode, Count: s.r.Count, Tolerations: s.r.Tolerations, Capacity: s.r.Capacity,
			DerivedAttributes: s.r.DerivedAttributes})
	}
	b.c.Spec.Devices.Requests = append(b.c.Spec.Devices.Requests, req)
	return b
}

// MatchAttribute adds a matchAttribute constraint over requests (none: all).
func (b *ClaimBuilder) MatchAttribute(attr string, requests ...string) *ClaimBuilder {
	b.c.Spec.Devices.Constraints = append(b.c.Spec.Devices.Constraints, resourcev1.DeviceConstraint{
		Requests: requests, MatchAttribute: ptr.To(api.FullyQualifiedName(attr))})
	return b
}

// DistinctAttribute adds a distinctAttribute constraint.
func (b *ClaimBuilder) DistinctAttribute(attr string, requests ...string) *ClaimBuilder {
	b.c.Spec.Devices.Constraints = append(b.c.Spec.Devices.Constraints, resourcev1.DeviceConstraint{
		Requests: requests, DistinctAttribute: ptr.To(api.FullyQualifiedName(attr))})
	return b
}

// Allocated sets status.allocation with results "request driver pool device".
func (b *ClaimBuilder) Allocated(results ...resourcev1.DeviceRequestAllocationResult) *ClaimBuilder {
	b.c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
	return b
}

// Obj returns the claim.
func (b *ClaimBuilder) Obj() *resourcev1.ResourceClaim { return b.c }

// Result is an allocation result for Allocated.
func Result(request, driver, pool, device string) resourcev1.DeviceRequestAllocationResult {
	return resourcev1.DeviceRequestAllocationResult{Request: request, Driver: driver, Pool: pool, Device: device}
}

// RequestBuilder builds an exact request or a subrequest.
type RequestBuilder struct {
	name string
	r    resourcev1.ExactDeviceRequest
}

// Request starts an ExactCount request for one device of class.
func Request(name, class string) *RequestBuilder {
	return &RequestBuilder{name: name, r: resourcev1.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}
}
func (b *RequestBuilder) Count(n int64) *RequestBuilder { b.r.Count = n; return b }
func (b *RequestBuilder) All() *RequestBuilder {
	b.r.AllocationMode = resourcev1.DeviceAllocationModeAll
	b.r.Count = 0
	return b
}
func (b *RequestBuilder) Admin() *RequestBuilder { b.r.AdminAccess = ptr.To(true); return b }

// Derived adds a derived attribute computed by a CEL expression.
func (b *RequestBuilder) Derived(name, expr string) *RequestBuilder {
	b.r.DerivedAttributes = append(b.r.DerivedAttributes, resourcev1.DeviceDerivedAttribute{
		Name: resourcev1.FullyQualifiedName(name), Expression: expr})
	return b
}
func (b *RequestBuilder) Selector(exprs ...string) *RequestBuilder {
	for _, e := range exprs {
		b.r.Selectors = append(b.r.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return b
}
func (b *RequestBuilder) Tolerate(key string, effect resourcev1.DeviceTaintEffect) *RequestBuilder {
	b.r.Tolerations = append(b.r.Tolerations, resourcev1.DeviceToleration{Key: key, Operator: resourcev1.DeviceTolerationOpExists, Effect: effect})
	return b
}
func (b *RequestBuilder) Capacity(k, v string) *RequestBuilder {
	if b.r.Capacity == nil {
		b.r.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{}}
	}
	b.r.Capacity.Requests[resourcev1.QualifiedName(k)] = resource.MustParse(v)
	return b
}

// Node builds a node with labels (key, value pairs).
func Node(name string, labels ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(labels); i += 2 {
		n.Labels[labels[i]] = labels[i+1]
	}
	return n
}

// Name formats a numbered name such as "gpu-3".
func Name(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
