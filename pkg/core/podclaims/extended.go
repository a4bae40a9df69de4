package podclaims

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/validation"
)

// Extended resources backed by DRA (KEP-5004, DRAExtendedResource): a
// container may ask for an extended resource such as example.com/gpu: 2
// that no device plugin advertises but a DeviceClass stands for, through
// spec.extendedResourceName or the implicit name
// deviceclass.resource.kubernetes.io/<class>. kube-scheduler then
// allocates devices of that class on the chosen node, in one claim per pod
// that it creates itself (the extended-resource claim), and records in
// the pod's status.extendedResourceClaimStatus which request of the claim
// serves which container, which is what the kubelet reads.
//
// Which node serves a resource through DRA depends on the node: one that
// advertises the resource in status.allocatable serves it by its device
// plugin, and NodeResourcesFit counts it there (KEP-5004 "Device plugin
// and DRA co-existence"). So the claim's requests are per node: Extended
// holds what the pod asks, OnNode says what a node leaves to DRA, and
// Claim makes the claim for that.

// ExtendedEntryName is the name an extended-resource claim goes by among
// a pod's claims: kube-scheduler's name for the claim before it exists,
// which no entry of spec.resourceClaims can have.
const ExtendedEntryName = "<extended-resources>"

// ClassResolver finds the DeviceClass behind an extended resource name,
// nil if none: kube-scheduler's DeviceClassResolver, which
// k8s.io/dynamic-resource-allocation's ExtendedResourceCache implements
// (where two classes name the same resource, the newer one wins).
type ClassResolver interface {
	GetDeviceClass(name corev1.ResourceName) *resourcev1.DeviceClass
}

// Extended is what a pod asks of extended resources that DRA may serve.
type Extended struct {
	pod *corev1.Pod
	// resources are the pod's extended resources, sorted by name, with
	// the DeviceClass of those one backs.
	resources []extendedResource
	// mapped counts the resources with a class; they come first in bit
	// order (see Need).
	mapped int
}

type extendedResource struct {
	name  corev1.ResourceName
	count int64
	class *resourcev1.DeviceClass
	bit   Need
}

// ClassesOf is the ClassResolver of a set of DeviceClasses, for callers
// that have the classes rather than kube-scheduler's cache: the same cache,
// fed with them, so that a name two classes claim goes to the same one.
func ClassesOf(classes []*resourcev1.DeviceClass) ClassResolver {
	cache := extendedresourcecache.NewExtendedResourceCache(klog.Background())
	for _, c := range classes {
		cache.OnAdd(c, true)
	}
	return cache
}

// Need is a set of a pod's extended resources that a node leaves to DRA,
// one bit per resource a DeviceClass backs. Nodes with the same Need get
// the same claim.
type Need uint64

// maxExtended bounds the extended resources of one pod that DRA serves,
// so that Need is one word; the API allows far more names than any pod
// asks for.
const maxExtended = 64

// ExtendedOf returns what the pod asks of extended resources, or nil when
// no DeviceClass backs any of them (then NodeResourcesFit alone decides,
// and DRA has nothing to do). The requests are the pod's effective ones,
// as kube-scheduler sums them: its containers', sidecars' and the largest
// init container's.
func ExtendedOf(pod *corev1.Pod, classes ClassResolver) (*Extended, error) {
	if classes == nil {
		return nil, nil
	}
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	e := &Extended{pod: pod}
	for name, q := range reqs {
		if !isDRAExtendedName(name) || q.IsZero() {
			continue
		}
		r := extendedResource{name: name, count: q.Value(), class: classes.GetDeviceClass(name)}
		if r.class != nil {
			e.mapped++
		}
		e.resources = append(e.resources, r)
	}
	if e.mapped == 0 {
		return nil, nil
	}
	if e.mapped > maxExtended {
		return nil, fmt.Errorf("pod %s/%s asks for %d extended resources that DeviceClasses back; at most %d are supported", pod.Namespace, pod.Name, e.mapped, maxExtended)
	}
	// Mapped resources first, each group by name: bits and request
	// order do not depend on map order.
	slices.SortFunc(e.resources, func(a, b extendedResource) int {
		if (a.class == nil) != (b.class == nil) {
			if a.class != nil {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a.name), string(b.name))
	})
	for i := range e.mapped {
		e.resources[i].bit = 1 << i
	}
	return e, nil
}

// isDRAExtendedName reports whether a resource name may be served through
// a DeviceClass: an extended resource name (outside kubernetes.io, not a
// quota name) or the implicit name of a class.
func isDRAExtendedName(name corev1.ResourceName) bool {
	s := string(name)
	if strings.HasPrefix(s, resourcev1.ResourceDeviceClassPrefix) {
		return true
	}
	return validation.IsExtendedResourceName(s)
}

// NodeResourceError says that a node neither advertises an extended
// resource the pod asks for nor has DRA serve it.
type NodeResourceError struct {
	Resource corev1.ResourceName
}

func (e *NodeResourceError) Error() string {
	return fmt.Sprintf("cannot fit resource %s: the node does not advertise it and no DeviceClass backs it", e.Resource)
}

// OnNode returns the pod's extended resources that a node with the given
// allocatable scalar resources leaves to DRA: those a DeviceClass backs
// and the node does not advertise (a device plugin's resource takes
// precedence). A resource neither advertised nor backed is an error, as
// the pod cannot run there.
func (e *Extended) OnNode(allocatable map[corev1.ResourceName]int64) (Need, error) {
	var need Need
	for _, r := range e.resources {
		n, listed := allocatable[r.name]
		switch {
		case r.class != nil && n == 0:
			need |= r.bit
		case !listed:
			return 0, &NodeResourceError{Resource: r.name}
		}
	}
	return need, nil
}

// Mapped is every extended resource of the pod that a DeviceClass backs:
// what a node without device plugins leaves to DRA.
func (e *Extended) Mapped() Need {
	return Need(1)<<e.mapped - 1
}

// Allocatable is a node's status.allocatable as OnNode reads it: scalar
// resources by name, in whole units.
func Allocatable(node *corev1.Node) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(node.Status.Allocatable))
	for name, q := range node.Status.Allocatable {
		out[name] = q.Value()
	}
	return out
}

// Resources lists the extended resources in need, by name, with their
// class, for explanations.
func (e *Extended) Resources(need Need) []string {
	var out []string
	for _, r := range e.resources {
		if need&r.bit != 0 {
			out = append(out, fmt.Sprintf("%s: %d (DeviceClass %s)", r.name, r.count, r.class.Name))
		}
	}
	return out
}

// Claim makes the extended-resource claim for need, named name, as
// kube-scheduler creates it: controlled by the pod, annotated
// resource.kubernetes.io/extended-resource-claim: "true", its generateName
// "<pod>-extended-resources-", one exact-count request per container and
// resource, and the request mappings that go into the pod's
// status.extendedResourceClaimStatus with the claim's name. An empty need
// needs no claim: nil.
func (e *Extended) Claim(need Need, name string) (*resourcev1.ResourceClaim, []corev1.ContainerExtendedResourceRequest) {
	if need == 0 {
		return nil, nil
	}
	claim := &resourcev1.ResourceClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			GenerateName:    ExtendedGenerateName(e.pod.Name),
			Namespace:       e.pod.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: e.pod.Name, UID: e.pod.UID, Controller: ptr.To(true)}},
			Annotations:     map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"},
		},
	}
	var mappings []corev1.ContainerExtendedResourceRequest
	for _, r := range e.resources {
		if need&r.bit == 0 {
			continue
		}
		reqs, ms := e.requestsFor(r)
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, reqs...)
		mappings = append(mappings, ms...)
	}
	slices.SortFunc(claim.Spec.Devices.Requests, func(a, b resourcev1.DeviceRequest) int { return strings.Compare(a.Name, b.Name) })
	return claim, mappings
}

// requestsFor is one resource's requests and mappings. Containers that
// run for the pod's life (regular ones, and sidecars: init containers
// that restart always) each get a request of their own. An init container
// that runs to completion first uses the devices of the long-lived
// containers started after it, and asks for more only for what they do
// not cover; since such init containers run one at a time, they share
// one request, the largest of theirs. Requests are named
// container-<i>-request-<j>: i indexes init containers then containers,
// j the resource among the container's requests sorted by name; the
// kubelet reads the names through the mappings only, but they must be
// what kube-scheduler writes, so that a claim made by either scheduler
// reads the same.
func (e *Extended) requestsFor(r extendedResource) ([]resourcev1.DeviceRequest, []corev1.ContainerExtendedResourceRequest) {
	spec := &e.pod.Spec
	n := len(spec.InitContainers) + len(spec.Containers)
	container := func(i int) *corev1.Container {
		if i < len(spec.InitContainers) {
			return &spec.InitContainers[i]
		}
		return &spec.Containers[i-len(spec.InitContainers)]
	}
	shortLived := func(i int) bool {
		return i < len(spec.InitContainers) && ptr.Deref(spec.InitContainers[i].RestartPolicy, "") != corev1.ContainerRestartPolicyAlways
	}
	mapping := func(c *corev1.Container, request string) corev1.ContainerExtendedResourceRequest {
		return corev1.ContainerExtendedResourceRequest{ContainerName: c.Name, ResourceName: string(r.name), RequestName: request}
	}

	// Long-lived containers' requests, by container index (nil: none).
	long := make([]*resourcev1.DeviceRequest, n)
	var longMappings, shortMappings []corev1.ContainerExtendedResourceRequest
	for i := range n {
		if shortLived(i) {
			continue
		}
		c := container(i)
		if count := containerCount(c, r.name); count > 0 {
			long[i] = deviceRequest(c, i, r, count)
			longMappings = append(longMappings, mapping(c, long[i].Name))
		}
	}
	var largest *resourcev1.DeviceRequest
	var own []string // names of the short-lived requests made
	for i := range n {
		if !shortLived(i) {
			continue
		}
		c := container(i)
		count := containerCount(c, r.name)
		if count == 0 {
			continue
		}
		covered := int64(0)
		for _, l := range long[i:] {
			if l == nil || covered >= count {
				continue
			}
			covered += l.Exactly.Count
			shortMappings = append(shortMappings, mapping(c, l.Name))
		}
		if covered >= count {
			continue
		}
		req := deviceRequest(c, i, r, count-covered)
		own = append(own, req.Name)
		shortMappings = append(shortMappings, mapping(c, req.Name))
		if largest == nil || req.Exactly.Count > largest.Exactly.Count {
			largest = req
		}
	}
	var reqs []resourcev1.DeviceRequest
	if largest != nil {
		reqs = append(reqs, *largest)
		for k := range shortMappings {
			if slices.Contains(own, shortMappings[k].RequestName) {
				shortMappings[k].RequestName = largest.Name
			}
		}
	}
	for _, l := range long {
		if l != nil {
			reqs = append(reqs, *l)
		}
	}
	return reqs, append(longMappings, shortMappings...)
}

// containerCount is how many units of the resource the container
// requests; a quantity that is not a whole number asks for none, as
// admission allows only whole extended resources.
func containerCount(c *corev1.Container, name corev1.ResourceName) int64 {
	q, ok := c.Resources.Requests[name]
	if !ok {
		return 0
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return 0
	}
	return n
}

func deviceRequest(c *corev1.Container, index int, r extendedResource, count int64) *resourcev1.DeviceRequest {
	names := make([]string, 0, len(c.Resources.Requests))
	for name := range c.Resources.Requests {
		names = append(names, string(name))
	}
	slices.Sort(names)
	return &resourcev1.DeviceRequest{
		Name: fmt.Sprintf("container-%d-request-%d", index, slices.Index(names, string(r.name))),
		Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: r.class.Name,
			AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
			Count:           count,
		},
	}
}

// ExtendedGenerateName is the generateName of a pod's extended-resource
// claim: "<pod>-extended-resources-".
func ExtendedGenerateName(pod string) string {
	return pod + "-extended-resources-"
}

// ExtendedClaimName is a name the API server could give a claim with the
// generateName of the pod's extended-resource claim: the base, cut to 58
// characters as the API server cuts it, and suffix (five characters).
func ExtendedClaimName(pod, suffix string) string {
	const maxBaseLen = 58
	base := ExtendedGenerateName(pod)
	if len(base) > maxBaseLen {
		base = base[:maxBaseLen]
	}
	return base + suffix
}

// StableExtendedClaimName is the name the offline verbs give a pod's
// extended-resource claim: the API server would pick five random
// characters; these come from the pod, so that the same input always
// gives the same name.
func StableExtendedClaimName(pod *corev1.Pod) string {
	return ExtendedClaimName(pod.Name, nameSuffix(pod.Namespace+"/"+pod.Name+"/"+ExtendedEntryName))
}

// IsExtendedClaimOf reports whether claim is the pod's extended-resource
// claim: annotated as one and controlled by the pod.
func IsExtendedClaimOf(pod *corev1.Pod, claim *resourcev1.ResourceClaim) bool {
	if claim.Namespace != pod.Namespace || claim.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" {
		return false
	}
	owner := metav1.GetControllerOf(claim)
	return owner != nil && owner.Name == pod.Name && owner.UID == pod.UID
}
