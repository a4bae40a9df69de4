package podclaims

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// classes resolves extended resource names as kube-scheduler does, through
// k8s.io/dynamic-resource-allocation's cache fed with the classes.
func classes(cs ...*resourcev1.DeviceClass) ClassResolver {
	cache := extendedresourcecache.NewExtendedResourceCache(klog.Background())
	for _, c := range cs {
		cache.OnAdd(c, true)
	}
	return cache
}

func class(name, extended string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if extended != "" {
		c.Spec.ExtendedResourceName = ptr.To(extended)
	}
	return c
}

func ctr(name string, requests ...any) corev1.Container {
	c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
	for i := 0; i < len(requests); i += 2 {
		c.Resources.Requests[corev1.ResourceName(requests[i].(string))] = resource.MustParse(requests[i+1].(string))
	}
	return c
}

func sidecar(c corev1.Container) corev1.Container {
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c
}

func podWith(init []corev1.Container, containers ...corev1.Container) *corev1.Pod {
	p := pod()
	p.Spec.InitContainers, p.Spec.Containers = init, containers
	return p
}

// req is an expected device request: name, class, count.
type req struct {
	name, class string
	count       int64
}

func mapping(container, res, request string) corev1.ContainerExtendedResourceRequest {
	return corev1.ContainerExtendedResourceRequest{ContainerName: container, ResourceName: res, RequestName: request}
}

// TestExtendedRequests: which pods DRA serves extended resources for, on
// which nodes, and the claim kube-scheduler would create for them.
func TestExtendedRequests(t *testing.T) {
	gpu := class("gpu", "example.com/gpu")
	nic := class("nic", "")
	cls := classes(gpu, nic)
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		allocatable map[corev1.ResourceName]int64
		// none: ExtendedOf finds nothing for DRA to do.
		none     bool
		notFit   corev1.ResourceName
		requests []req
		mappings []corev1.ContainerExtendedResourceRequest
	}{{
		name:     "explicit name",
		pod:      podWith(nil, ctr("main", "example.com/gpu", "2")),
		requests: []req{{"container-0-request-0", "gpu", 2}},
		mappings: []corev1.ContainerExtendedResourceRequest{mapping("main", "example.com/gpu", "container-0-request-0")},
	}, {
		name:     "implicit name; the request index counts the container's other resources, sorted",
		pod:      podWith(nil, ctr("main", "cpu", "1", "deviceclass.resource.kubernetes.io/nic", "1")),
		requests: []req{{"container-0-request-1", "nic", 1}},
		mappings: []corev1.ContainerExtendedResourceRequest{mapping("main", "deviceclass.resource.kubernetes.io/nic", "container-0-request-1")},
	}, {
		name:     "the implicit name of a class with an explicit one",
		pod:      podWith(nil, ctr("main", "deviceclass.resource.kubernetes.io/gpu", "1")),
		requests: []req{{"container-0-request-0", "gpu", 1}},
		mappings: []corev1.ContainerExtendedResourceRequest{mapping("main", "deviceclass.resource.kubernetes.io/gpu", "container-0-request-0")},
	}, {
		name:        "the node's device plugin takes precedence",
		pod:         podWith(nil, ctr("main", "example.com/gpu", "2")),
		allocatable: map[corev1.ResourceName]int64{"example.com/gpu": 4},
	}, {
		name:        "a resource the node lists at zero is DRA's",
		pod:         podWith(nil, ctr("main", "example.com/gpu", "1")),
		allocatable: map[corev1.ResourceName]int64{"example.com/gpu": 0},
		requests:    []req{{"container-0-request-0", "gpu", 1}},
		mappings:    []corev1.ContainerExtendedResourceRequest{mapping("main", "example.com/gpu", "container-0-request-0")},
	}, {
		name: "an unmapped name alone is NodeResourcesFit's",
		pod:  podWith(nil, ctr("main", "example.com/fpga", "1")),
		none: true,
	}, {
		name:   "an unmapped name the node does not list: the pod does not fit",
		pod:    podWith(nil, ctr("main", "example.com/fpga", "1", "example.com/gpu", "1")),
		notFit: "example.com/fpga",
	}, {
		name:        "an unmapped name the node lists is left to NodeResourcesFit",
		pod:         podWith(nil, ctr("main", "example.com/fpga", "1", "example.com/gpu", "1")),
		allocatable: map[corev1.ResourceName]int64{"example.com/fpga": 1},
		requests:    []req{{"container-0-request-1", "gpu", 1}},
		mappings:    []corev1.ContainerExtendedResourceRequest{mapping("main", "example.com/gpu", "container-0-request-1")},
	}, {
		name: "native and quota names are not extended resources",
		pod:  podWith(nil, ctr("main", "cpu", "1", "requests.example.com/gpu", "1", "hugepages-2Mi", "2Mi")),
		none: true,
	}, {
		name: "a zero request asks for nothing",
		pod:  podWith(nil, ctr("main", "example.com/gpu", "0")),
		none: true,
	}, {
		name: "containers each get their request; two resources",
		pod: podWith(nil, ctr("a", "example.com/gpu", "1"),
			ctr("b", "example.com/gpu", "2", "deviceclass.resource.kubernetes.io/nic", "1")),
		requests: []req{{"container-0-request-0", "gpu", 1}, {"container-1-request-0", "nic", 1}, {"container-1-request-1", "gpu", 2}},
		mappings: []corev1.ContainerExtendedResourceRequest{
			mapping("b", "deviceclass.resource.kubernetes.io/nic", "container-1-request-0"),
			mapping("a", "example.com/gpu", "container-0-request-0"),
			mapping("b", "example.com/gpu", "container-1-request-1"),
		},
	}, {
		name:     "an init container uses the devices of the containers after it and asks for the rest",
		pod:      podWith([]corev1.Container{ctr("init", "example.com/gpu", "3")}, ctr("main", "example.com/gpu", "1")),
		requests: []req{{"container-0-request-0", "gpu", 2}, {"container-1-request-0", "gpu", 1}},
		mappings: []corev1.ContainerExtendedResourceRequest{
			mapping("main", "example.com/gpu", "container-1-request-0"),
			mapping("init", "example.com/gpu", "container-1-request-0"),
			mapping("init", "example.com/gpu", "container-0-request-0"),
		},
	}, {
		name:     "an init container covered by the containers after it asks for nothing",
		pod:      podWith([]corev1.Container{ctr("init", "example.com/gpu", "1")}, ctr("main", "example.com/gpu", "2")),
		requests: []req{{"container-1-request-0", "gpu", 2}},
		mappings: []corev1.ContainerExtendedResourceRequest{
			mapping("main", "example.com/gpu", "container-1-request-0"),
			mapping("init", "example.com/gpu", "container-1-request-0"),
		},
	}, {
		name:     "init containers run one at a time and share the largest request",
		pod:      podWith([]corev1.Container{ctr("i0", "example.com/gpu", "2"), ctr("i1", "example.com/gpu", "3")}, ctr("main", "cpu", "1")),
		requests: []req{{"container-1-request-0", "gpu", 3}},
		mappings: []corev1.ContainerExtendedResourceRequest{
			mapping("i0", "example.com/gpu", "container-1-request-0"),
			mapping("i1", "example.com/gpu", "container-1-request-0"),
		},
	}, {
		name: "a sidecar lives as long as the pod: a request of its own, which init containers before it use",
		pod: podWith([]corev1.Container{ctr("i0", "example.com/gpu", "1"), sidecar(ctr("side", "example.com/gpu", "1")), ctr("i2", "example.com/gpu", "1")},
			ctr("main", "cpu", "1")),
		requests: []req{{"container-1-request-0", "gpu", 1}, {"container-2-request-0", "gpu", 1}},
		mappings: []corev1.ContainerExtendedResourceRequest{
			mapping("side", "example.com/gpu", "container-1-request-0"),
			mapping("i0", "example.com/gpu", "container-1-request-0"),
			mapping("i2", "example.com/gpu", "container-2-request-0"),
		},
	}, {
		name: "pod-level resources do not hide the containers' extended resources",
		pod: func() *corev1.Pod {
			p := podWith(nil, ctr("main", "example.com/gpu", "1"))
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
			return p
		}(),
		requests: []req{{"container-0-request-0", "gpu", 1}},
		mappings: []corev1.ContainerExtendedResourceRequest{mapping("main", "example.com/gpu", "container-0-request-0")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ExtendedOf(tc.pod, cls)
			if err != nil {
				t.Fatal(err)
			}
			if tc.none {
				if e != nil {
					t.Fatalf("ExtendedOf found extended resources for DRA: %v", e.Resources(^Need(0)))
				}
				return
			}
			if e == nil {
				t.Fatal("ExtendedOf found nothing for DRA")
			}
			need, err := e.OnNode(tc.allocatable)
			var nre *NodeResourceError
			switch {
			case tc.notFit != "":
				if !errors.As(err, &nre) || nre.Resource != tc.notFit {
					t.Fatalf("OnNode: got %v, want the node not to fit %s", err, tc.notFit)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			c, ms := e.Claim(need, "trainer-extended-resources-abcde")
			if len(tc.requests) == 0 {
				if c != nil {
					t.Fatalf("a claim for a node that serves everything: %v", c.Spec.Devices.Requests)
				}
				return
			}
			if c == nil {
				t.Fatal("no claim")
			}
			var got []req
			for _, r := range c.Spec.Devices.Requests {
				if r.Exactly == nil || r.Exactly.AllocationMode != resourcev1.DeviceAllocationModeExactCount {
					t.Fatalf("request %s is not an exact count", r.Name)
				}
				got = append(got, req{r.Name, r.Exactly.DeviceClassName, r.Exactly.Count})
			}
			if diff := cmp.Diff(tc.requests, got, cmp.AllowUnexported(req{})); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.mappings, ms); diff != "" {
				t.Errorf("mappings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExtendedClaimMetadata: the claim reads as kube-scheduler's to the
// kubelet and the controllers: owner, annotation, generateName.
func TestExtendedClaimMetadata(t *testing.T) {
	p := podWith(nil, ctr("main", "example.com/gpu", "1"))
	e, err := ExtendedOf(p, classes(class("gpu", "example.com/gpu")))
	if err != nil || e == nil {
		t.Fatalf("ExtendedOf: %v, %v", e, err)
	}
	need, _ := e.OnNode(nil)
	name := ExtendedClaimName(p.Name, "xyz12")
	c, _ := e.Claim(need, name)
	if c.Name != "trainer-extended-resources-xyz12" || c.GenerateName != "trainer-extended-resources-" || c.Namespace != ns {
		t.Errorf("name %s/%s, generateName %s", c.Namespace, c.Name, c.GenerateName)
	}
	if c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" {
		t.Errorf("annotations %v", c.Annotations)
	}
	if owner := metav1.GetControllerOf(c); owner == nil || owner.Kind != "Pod" || owner.APIVersion != "v1" || owner.Name != p.Name || owner.UID != p.UID {
		t.Errorf("controller %+v", owner)
	}
	if !IsExtendedClaimOf(p, c) {
		t.Error("IsExtendedClaimOf does not recognise the claim")
	}
	other := p.DeepCopy()
	other.UID = "another-incarnation"
	if IsExtendedClaimOf(other, c) {
		t.Error("the claim of an earlier pod of the same name is taken for this pod's")
	}
	plain := c.DeepCopy()
	plain.Annotations = nil
	if IsExtendedClaimOf(p, plain) {
		t.Error("a claim without the annotation is taken for the extended-resource claim")
	}
	if got := ExtendedClaimName(strings.Repeat("p", 60), "abcde"); len(got) != 63 || got[58:] != "abcde" {
		t.Errorf("a long pod's claim name %q (%d characters): want the base cut to 58 and the suffix", got, len(got))
	}
}

// TestResolveExtended: the resolver adds the extended-resource entry after
// the pod's claims, with the claim an earlier attempt made, if any.
func TestResolveExtended(t *testing.T) {
	cls := classes(class("gpu", "example.com/gpu"))
	p := podWith(nil, ctr("main", "example.com/gpu", "1"))
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{named("net", "shared")}
	e, _ := ExtendedOf(p, cls)
	need, _ := e.OnNode(nil)
	made, _ := e.Claim(need, ExtendedClaimName(p.Name, "aaaaa"))
	w := world{claims: []*resourcev1.ResourceClaim{claim("shared", nil, ""), made}}

	entries, err := Resolver{Claim: w.claim}.Resolve(p)
	if err != nil || len(entries) != 1 {
		t.Fatalf("without Classes: %d entries, %v; want only the named claim", len(entries), err)
	}
	for _, tc := range []struct {
		name string
		r    Resolver
		pod  *corev1.Pod
		want *resourcev1.ResourceClaim
	}{
		{"none made yet", Resolver{Claim: w.claim, Classes: cls}, p, nil},
		{"named in the pod's status", Resolver{Claim: w.claim, Classes: cls}, func() *corev1.Pod {
			q := p.DeepCopy()
			q.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: made.Name}
			return q
		}(), made},
		{"found by the scheduler's index", Resolver{Claim: w.claim, Classes: cls, ExtendedClaim: func(*corev1.Pod) *resourcev1.ResourceClaim { return made }}, p, made},
		{"found among the claims offline", w.offline(), p, made},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Classes = cls
			entries, err := tc.r.Resolve(tc.pod)
			if err != nil || len(entries) != 2 {
				t.Fatalf("%d entries, %v; want the named claim and the extended resources", len(entries), err)
			}
			x := entries[1]
			if x.Name != ExtendedEntryName || x.Extended == nil || x.Index != -1 {
				t.Fatalf("second entry %+v", x)
			}
			if x.Claim != tc.want {
				t.Errorf("claim %v, want %v", x.Claim, tc.want)
			}
		})
	}
}
