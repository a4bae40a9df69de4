package decode

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/workload"
)

// The defaults below are those kube-apiserver 1.37 applies: to
// resource.k8s.io/v1 objects, the +default markers of the v1 types (only
// DeviceToleration.operator has one) and the hand-written defaulters of
// pkg/apis/resource/v1 (ExactDeviceRequest, DeviceSubRequest,
// DeviceTaint); to Nodes and Pods, those a verb reads (see defaultNode);
// to Workloads, pkg/core/workload's.
// Every function is idempotent.

// SetDefaults applies API-server defaults to one of the object types that
// Object.Obj holds. It reports false, changing nothing, for other types.
func SetDefaults(obj any) bool {
	switch o := obj.(type) {
	case *api.ResourceSlice:
		defaultResourceSlice(o)
	case *resourcev1.DeviceClass:
		defaultDeviceClass(o)
	case *resourcev1.ResourceClaim:
		defaultResourceClaim(o)
	case *resourcev1.ResourceClaimTemplate:
		defaultResourceClaimTemplate(o)
	case *corev1.Node:
		defaultNode(o)
	case *corev1.Pod:
		defaultPod(o)
	case *workload.Workload:
		workload.SetDefaults(o)
	default:
		return false
	}
	return true
}

// defaultResourceSlice applies nothing. The server's only ResourceSlice
// default sets spec.devices[].taints[].timeAdded to the time of the create
// request when it is unset. A manifest has no such time: inventing "now"
// would make decoding the same file twice give different objects, and
// would make taints look fresh that a real cluster might have added long
// ago. So timeAdded stays nil, and readers treat nil as "unknown".
func defaultResourceSlice(*api.ResourceSlice) {}

// defaultDeviceClass applies nothing: no DeviceClass field has a default.
func defaultDeviceClass(*resourcev1.DeviceClass) {}

func defaultResourceClaim(c *resourcev1.ResourceClaim) {
	defaultClaimSpec(&c.Spec)
	if c.Status.Allocation != nil {
		results := c.Status.Allocation.Devices.Results
		for i := range results {
			defaultTolerations(results[i].Tolerations)
		}
	}
}

func defaultResourceClaimTemplate(t *resourcev1.ResourceClaimTemplate) {
	defaultClaimSpec(&t.Spec.Spec)
}

// The core/v1 defaults are many (DNS and restart policies, ports, probes,
// termination messages, ...). Those applied here are the ones a verb reads: what
// a node offers and what a pod asks, which decide the extended-resource
// claim kube-scheduler makes (pkg/core/podclaims) and the resources a pod needs
// beside its devices. The others are left out, not to dress objects as
// server-stored where no verb would notice. kube-apiserver 1.37 applies
// these in pkg/apis/core/v1/defaults.go (requests from limits, quantity
// rounding, a node's allocatable from its capacity) and, for pod-level
// resources, when it prepares a pod for creation
// (PodLevelResourcesFixDefaulting, on by default in 1.37). A sidecar's
// restartPolicy has no default: an init container without one runs to
// completion, as it is read.

// defaultNode: a node that states its capacity but not its allocatable is
// stored with its allocatable equal to its capacity; quantities are
// rounded up to milli-units.
func defaultNode(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = make(corev1.ResourceList, len(n.Status.Capacity))
		for name, q := range n.Status.Capacity {
			n.Status.Allocatable[name] = q.DeepCopy()
		}
	}
	roundUp(n.Status.Capacity)
	roundUp(n.Status.Allocatable)
}

// defaultPod: every container and init container requests what it limits
// where it requests nothing of that resource (nvidia.com/gpu: 1 in limits
// asks for one GPU); quantities are rounded up to milli-units; and then the
// pod-level resources are completed from the containers'.
func defaultPod(p *corev1.Pod) {
	for i := range p.Spec.InitContainers {
		defaultContainerResources(&p.Spec.InitContainers[i].Resources)
	}
	for i := range p.Spec.Containers {
		defaultContainerResources(&p.Spec.Containers[i].Resources)
	}
	roundUp(p.Spec.Overhead)
	if r := p.Spec.Resources; r != nil {
		roundUp(r.Limits)
		roundUp(r.Requests)
	}
	defaultPodLevelResources(p)
}

func defaultContainerResources(r *corev1.ResourceRequirements) {
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = make(corev1.ResourceList, len(r.Limits))
		}
		r.Requests[name] = q.DeepCopy()
	}
	roundUp(r.Limits)
	roundUp(r.Requests)
}

// roundUp rounds every quantity up to a multiple of 1m, as the server
// stores them.
func roundUp(l corev1.ResourceList) {
	for name, q := range l {
		q.RoundUp(resource.Milli)
		l[name] = q
	}
}

// defaultPodLevelResources completes spec.resources (KEP-2837) when the pod
// sets some of it, for the resources it may hold (cpu, memory, hugepages):
//   - a hugepages limit the pod level lacks, and does not request, is the
//     containers' summed limit;
//   - a request the pod level lacks is, for cpu and memory, what the
//     containers request together (sidecars and init containers counted as
//     kube-scheduler counts them), and else the pod-level limit;
//   - a limit the pod level lacks, for a resource it requests and every
//     container limits, is the containers' limits together, or the request
//     when that is larger.
func defaultPodLevelResources(p *corev1.Pod) {
	r := p.Spec.Resources
	if r == nil || len(r.Requests) == 0 && len(r.Limits) == 0 {
		return
	}
	// Only the containers count, as the server counts them: not the
	// pod's status, nor the pod-level resources being completed.
	containers := &corev1.Pod{Spec: corev1.PodSpec{Containers: p.Spec.Containers, InitContainers: p.Spec.InitContainers}}
	limits := resourcehelper.AggregateContainerLimits(containers, resourcehelper.PodResourcesOptions{})
	for name, q := range limits {
		if !resourcehelper.IsSupportedPodLevelResource(name) || !isHugePages(name) {
			continue
		}
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if _, ok := r.Limits[name]; !ok {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[name] = q.DeepCopy()
		}
	}
	requests := resourcehelper.AggregateContainerRequests(containers, resourcehelper.PodResourcesOptions{})
	setRequest := func(name corev1.ResourceName, q resource.Quantity) {
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = q.DeepCopy()
	}
	for name, q := range requests {
		if _, ok := r.Requests[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) && !isHugePages(name) {
			setRequest(name, q)
		}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) {
			setRequest(name, q)
		}
	}
	for name, req := range r.Requests {
		if _, ok := r.Limits[name]; ok || !resourcehelper.IsSupportedPodLevelResource(name) || !everyContainerLimits(&p.Spec, name) {
			continue
		}
		limit, ok := limits[name]
		if !ok {
			continue
		}
		if req.Cmp(limit) > 0 {
			limit = req
		}
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Limits[name] = limit.DeepCopy()
	}
}

// everyContainerLimits reports whether every container of the pod, of
// every kind (ephemeral ones, which cannot set resources, included),
// limits the resource.
func everyContainerLimits(spec *corev1.PodSpec, name corev1.ResourceName) bool {
	for i := range spec.InitContainers {
		if _, ok := spec.InitContainers[i].Resources.Limits[name]; !ok {
			return false
		}
	}
	for i := range spec.Containers {
		if _, ok := spec.Containers[i].Resources.Limits[name]; !ok {
			return false
		}
	}
	for i := range spec.EphemeralContainers {
		if _, ok := spec.EphemeralContainers[i].Resources.Limits[name]; !ok {
			return false
		}
	}
	return true
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func defaultClaimSpec(s *resourcev1.ResourceClaimSpec) {
	for i := range s.Devices.Requests {
		r := &s.Devices.Requests[i]
		if e := r.Exactly; e != nil {
			e.AllocationMode, e.Count = defaultMode(e.AllocationMode, e.Count)
			defaultTolerations(e.Tolerations)
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			sub.AllocationMode, sub.Count = defaultMode(sub.AllocationMode, sub.Count)
			defaultTolerations(sub.Tolerations)
		}
	}
}

// defaultMode: an unset mode means ExactCount, and ExactCount with no
// count means one device. A count given with mode All is left for
// validation to reject.
func defaultMode(mode resourcev1.DeviceAllocationMode, count int64) (resourcev1.DeviceAllocationMode, int64) {
	if mode == "" {
		mode = resourcev1.DeviceAllocationModeExactCount
	}
	if mode == resourcev1.DeviceAllocationModeExactCount && count == 0 {
		count = 1
	}
	return mode, count
}

func defaultTolerations(ts []resourcev1.DeviceToleration) {
	for i := range ts {
		if ts[i].Operator == "" {
			ts[i].Operator = resourcev1.DeviceTolerationOpEqual
		}
	}
}
