// Package nodealloc computes what a pod's DRA devices take from the node's
// own allocatable resources: devices that declare nodeAllocatableResources
// (KEP-5517, "DRA: Node Allocatable Resources", gate
// DRANodeAllocatableResources) stand for CPU, memory or hugepages of the
// node, and a pod that gets them must fit the node with them counted.
//
// The rules, as KEP-5517 "Design Details" sets them and kube-scheduler
// 1.37 applies them:
//   - A device's mapping adds to the claim either a fixed quantity per
//     device (deviceMultiplier) or the capacity it consumes, times
//     capacityMultiplier (capacityKey). A claim with a mapped device stands
//     for resources of one pod and cannot be shared by pods.
//   - A device's overhead adds per pod (once) or per container (for every
//     container that uses the claim); claims with overhead only may be
//     shared.
//   - The pod's demand is its requests with the claims' statuses counted
//     (k8s.io/component-helpers' PodRequests does the arithmetic kubelet
//     and kube-scheduler share), checked against pod-level requests and
//     limits when the pod has them.
//
// Everything here is pure: callers look devices up and write statuses.
package nodealloc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Devices looks up the nodeAllocatableResources of an allocated device;
// nil for a device that declares none. An error means the device is not
// known on the node.
type Devices func(r *resourcev1.DeviceRequestAllocationResult) (map[corev1.ResourceName]resourcev1.NodeAllocatableResource, error)

// Claim is one of a pod's claims with the allocation it has or is about to
// get.
type Claim struct {
	// Entry is the claim's name in pod.spec.resourceClaims, which the
	// containers' resources.claims refer to.
	Entry string
	// Name of the ResourceClaim object.
	Name       string
	Allocation *resourcev1.AllocationResult
}

// Mapped reports whether the allocation holds a device whose node
// resources are mapped (not overhead only): such a claim stands for one
// pod's resources and cannot be shared (KEP-5517 "Claim sharing").
// Devices that cannot be looked up do not count.
func Mapped(a *resourcev1.AllocationResult, devices Devices) bool {
	if a == nil {
		return false
	}
	for i := range a.Devices.Results {
		nar, err := devices(&a.Devices.Results[i])
		if err != nil {
			continue
		}
		for _, r := range nar {
			if r.Mapping != nil {
				return true
			}
		}
	}
	return false
}

// Statuses returns the pod's nodeAllocatableResourceClaimStatuses for its
// claims: one per claim whose devices map or add node resources, sorted by
// claim name, each with its resources sorted by name and the containers
// (init containers first) that use it. A claim is considered only when
// one of its devices declares node resources; then every device of it
// must be known.
func Statuses(pod *corev1.Pod, claims []Claim, devices Devices) ([]corev1.NodeAllocatableResourceClaimStatus, error) {
	var out []corev1.NodeAllocatableResourceClaimStatus
	for _, c := range claims {
		st, err := claimStatus(c, devices)
		if err != nil {
			return nil, err
		}
		if st == nil {
			continue
		}
		for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, ctr := range list {
				for _, rc := range ctr.Resources.Claims {
					if rc.Name == c.Entry {
						st.Containers = append(st.Containers, ctr.Name)
					}
				}
			}
		}
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b corev1.NodeAllocatableResourceClaimStatus) int {
		return cmp.Compare(a.ResourceClaimName, b.ResourceClaimName)
	})
	return out, nil
}

func claimStatus(c Claim, devices Devices) (*corev1.NodeAllocatableResourceClaimStatus, error) {
	if c.Allocation == nil {
		return nil, nil
	}
	results := c.Allocation.Devices.Results
	declares := false
	for i := range results {
		if nar, err := devices(&results[i]); err == nil && len(nar) > 0 {
			declares = true
			break
		}
	}
	if !declares {
		return nil, nil
	}
	mapped := map[corev1.ResourceName]resource.Quantity{}
	overhead := map[corev1.ResourceName]*corev1.NodeAllocatableOverheadResources{}
	for i := range results {
		r := &results[i]
		nar, err := devices(r)
		if err != nil {
			return nil, fmt.Errorf("claim %s, device %s/%s/%s: %w", c.Name, r.Driver, r.Pool, r.Device, err)
		}
		for name, res := range nar {
			if m := res.Mapping; m != nil {
				q, ok, err := mappedQuantity(m, r, name)
				if err != nil {
					return nil, fmt.Errorf("claim %s, device %s/%s/%s: %w", c.Name, r.Driver, r.Pool, r.Device, err)
				}
				if ok {
					sum := mapped[name]
					sum.Add(q)
					mapped[name] = sum
				}
			}
			if o := res.Overhead; o != nil && (o.PerPod != nil || o.PerContainer != nil) {
				sum := overhead[name]
				if sum == nil {
					sum = &corev1.NodeAllocatableOverheadResources{Name: name}
					overhead[name] = sum
				}
				sum.PerPod = addTo(sum.PerPod, o.PerPod)
				sum.PerContainer = addTo(sum.PerContainer, o.PerContainer)
			}
		}
	}
	if len(mapped) == 0 && len(overhead) == 0 {
		return nil, nil
	}
	st := &corev1.NodeAllocatableResourceClaimStatus{
		ResourceClaimName: c.Name,
		Containers:        []string{},
		Mapping:           []corev1.NodeAllocatableMappedResources{},
		Overhead:          []corev1.NodeAllocatableOverheadResources{},
	}
	for name, q := range mapped {
		st.Mapping = append(st.Mapping, corev1.NodeAllocatableMappedResources{Name: name, Quantity: &q})
	}
	for _, o := range overhead {
		st.Overhead = append(st.Overhead, *o)
	}
	slices.SortFunc(st.Mapping, func(a, b corev1.NodeAllocatableMappedResources) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(st.Overhead, func(a, b corev1.NodeAllocatableOverheadResources) int { return cmp.Compare(a.Name, b.Name) })
	return st, nil
}

// mappedQuantity is what one device's mapping adds: the capacity the
// device consumes under capacityKey times capacityMultiplier, or
// deviceMultiplier. The API allows only one of the two. A capacity key the
// allocation did not consume adds nothing (false).
func mappedQuantity(m *resourcev1.NodeAllocatableMapping, r *resourcev1.DeviceRequestAllocationResult, name corev1.ResourceName) (resource.Quantity, bool, error) {
	if m.CapacityKey != nil && *m.CapacityKey != "" {
		key := *m.CapacityKey
		if r.ConsumedCapacity == nil {
			return resource.Quantity{}, false, fmt.Errorf("node resource %s maps capacity %q, but the allocation consumed no capacity", name, key)
		}
		consumed, ok := r.ConsumedCapacity[key]
		if !ok {
			return resource.Quantity{}, false, nil
		}
		q := consumed.DeepCopy()
		if f := m.CapacityMultiplier; f != nil && !f.Equal(resource.MustParse("1")) {
			d := q.AsDec()
			d.Mul(d, f.AsDec())
			q = *resource.NewDecimalQuantity(*d, consumed.Format)
		}
		return q, true, nil
	}
	if m.DeviceMultiplier != nil {
		return m.DeviceMultiplier.DeepCopy(), true, nil
	}
	return resource.Quantity{}, false, nil
}

func addTo(sum, q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return sum
	}
	if sum == nil {
		c := q.DeepCopy()
		return &c
	}
	sum.Add(*q)
	return sum
}

// Demand is what the pod asks of the node with statuses counted: its
// requests as kubelet and kube-scheduler compute them, pod-level requests
// included when podLevel (gate PodLevelResources).
func Demand(pod *corev1.Pod, statuses []corev1.NodeAllocatableResourceClaimStatus, podLevel bool) corev1.ResourceList {
	return resourcehelper.PodRequests(withStatuses(pod, statuses), resourcehelper.PodResourcesOptions{
		SkipPodLevelResources:                    !podLevel,
		UseDRANodeAllocatableResourceClaimStatus: true,
	})
}

// Extra is what the statuses add to the pod's demand: what a node's
// accounting lacks while it holds the pod without them.
func Extra(pod *corev1.Pod, statuses []corev1.NodeAllocatableResourceClaimStatus, podLevel bool) corev1.ResourceList {
	with := Demand(pod, statuses, podLevel)
	without := Demand(pod, nil, podLevel)
	out := corev1.ResourceList{}
	for name, q := range with {
		q = q.DeepCopy()
		if w, ok := without[name]; ok {
			q.Sub(w)
		}
		if q.Sign() > 0 {
			out[name] = q
		}
	}
	return out
}

// withStatuses is a shallow copy of pod whose status carries statuses; the
// helpers read only the spec and that field.
func withStatuses(pod *corev1.Pod, statuses []corev1.NodeAllocatableResourceClaimStatus) *corev1.Pod {
	cp := *pod
	cp.Status.NodeAllocatableResourceClaimStatuses = statuses
	return &cp
}

// PodLevelShortfall checks pod-level resources against what the
// containers and the claims need (KEP-5517 "Pod level resources"):
// pod-level requests must cover the containers' aggregate requests with
// the claims counted, pod-level hugepage limits the aggregate limits, and
// every other pod-level limit each container's limit plus the resources
// its claims add. It returns the first shortfall in kube-scheduler's
// words, or "".
func PodLevelShortfall(pod *corev1.Pod, statuses []corev1.NodeAllocatableResourceClaimStatus) string {
	if pod.Spec.Resources == nil || len(statuses) == 0 {
		return ""
	}
	p := withStatuses(pod, statuses)
	opts := resourcehelper.PodResourcesOptions{SkipPodLevelResources: true, UseDRANodeAllocatableResourceClaimStatus: true}
	if reqs := pod.Spec.Resources.Requests; reqs != nil {
		agg := resourcehelper.AggregateContainerRequests(p, opts)
		for _, name := range sortedNames(reqs) {
			if !resourcehelper.IsSupportedPodLevelResource(name) {
				continue
			}
			if v, ok := agg[name]; ok && v.Cmp(reqs[name]) > 0 {
				return fmt.Sprintf("pod level request for %s is insufficient to cover the aggregated container and node-allocatable DRA requests", name)
			}
		}
	}
	lims := pod.Spec.Resources.Limits
	if lims == nil {
		return ""
	}
	agg := resourcehelper.AggregateContainerLimits(p, opts)
	for _, name := range sortedNames(agg) {
		if !isHugePages(name) {
			continue
		}
		l, ok := lims[name]
		v := agg[name]
		if ok && v.Cmp(l) > 0 {
			return fmt.Sprintf("pod level limit for %s is insufficient to cover the aggregated container and node-allocatable DRA limits", name)
		}
	}
	for _, ctr := range pod.Spec.Containers {
		added := resourcehelper.GetContainerDRAAllocations(p, ctr.Name)
		for _, name := range sortedNames(ctr.Resources.Limits) {
			l, ok := lims[name]
			if isHugePages(name) || !ok {
				continue
			}
			eff := ctr.Resources.Limits[name].DeepCopy()
			eff.Add(added[name])
			if eff.Cmp(l) > 0 {
				return fmt.Sprintf("pod level limit for %s is insufficient to cover the limit and DRA overhead for container %s", name, ctr.Name)
			}
		}
	}
	return ""
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
