package nodealloc

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

type nar = map[corev1.ResourceName]resourcev1.NodeAllocatableResource

// catalog is a node's devices by name.
type catalog map[string]nar

func (c catalog) devices(r *resourcev1.DeviceRequestAllocationResult) (nar, error) {
	d, ok := c[r.Device]
	if !ok {
		return nil, errors.New("no such device")
	}
	return d, nil
}

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func perDevice(name corev1.ResourceName, n string) nar {
	return nar{name: {Mapping: &resourcev1.NodeAllocatableMapping{DeviceMultiplier: q(n)}}}
}

func allocation(devices ...string) *resourcev1.AllocationResult {
	a := &resourcev1.AllocationResult{}
	for _, d := range devices {
		a.Devices.Results = append(a.Devices.Results, resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "d", Pool: "p", Device: d})
	}
	return a
}

func consuming(a *resourcev1.AllocationResult, key, amount string) *resourcev1.AllocationResult {
	for i := range a.Devices.Results {
		a.Devices.Results[i].ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{resourcev1.QualifiedName(key): *q(amount)}
	}
	return a
}

// pod has containers "init" (init), "a" and "b"; a uses claim entries
// "cpus" and "mem", b uses "cpus", init uses "mem".
func pod() *corev1.Pod {
	uses := func(names ...string) corev1.ResourceRequirements {
		var r corev1.ResourceRequirements
		for _, n := range names {
			r.Claims = append(r.Claims, corev1.ResourceClaim{Name: n})
		}
		r.Requests = corev1.ResourceList{corev1.ResourceCPU: *q("1"), corev1.ResourceMemory: *q("1Gi")}
		return r
	}
	return &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: uses("mem")}},
		Containers:     []corev1.Container{{Name: "a", Resources: uses("cpus", "mem")}, {Name: "b", Resources: uses("cpus")}},
	}}
}

// quantities renders statuses with canonical quantity strings, so that
// two ways of writing one amount compare equal.
func quantities(sts []corev1.NodeAllocatableResourceClaimStatus) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, st := range sts {
		m := map[string]string{}
		for _, mp := range st.Mapping {
			m["map:"+string(mp.Name)] = mp.Quantity.String()
		}
		for _, o := range st.Overhead {
			if o.PerPod != nil {
				m["pod:"+string(o.Name)] = o.PerPod.String()
			}
			if o.PerContainer != nil {
				m["ctr:"+string(o.Name)] = o.PerContainer.String()
			}
		}
		out[st.ResourceClaimName] = m
	}
	return out
}

func TestStatuses(t *testing.T) {
	devs := catalog{
		"cpu-0":     perDevice(corev1.ResourceCPU, "4"),
		"cpu-1":     perDevice(corev1.ResourceCPU, "4"),
		"plain":     nil,
		"memdev":    {corev1.ResourceMemory: {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To(resourcev1.QualifiedName("size")), CapacityMultiplier: q("2")}}},
		"memdev-1x": {corev1.ResourceMemory: {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To(resourcev1.QualifiedName("size"))}}},
		"nic": {
			corev1.ResourceMemory: {Overhead: &resourcev1.NodeAllocatableOverhead{PerPod: q("100Mi"), PerContainer: q("10Mi")}},
			corev1.ResourceCPU:    {Overhead: &resourcev1.NodeAllocatableOverhead{PerPod: q("100m")}},
		},
	}
	for _, tc := range []struct {
		name    string
		claims  []Claim
		want    map[string]map[string]string
		ctrs    map[string][]string
		wantErr bool
	}{{
		name:   "device multiplier adds per device",
		claims: []Claim{{Entry: "cpus", Name: "pod-cpus", Allocation: allocation("cpu-0", "cpu-1", "plain")}},
		want:   map[string]map[string]string{"pod-cpus": {"map:cpu": "8"}},
		ctrs:   map[string][]string{"pod-cpus": {"a", "b"}},
	}, {
		name:   "capacity key times multiplier",
		claims: []Claim{{Entry: "mem", Name: "pod-mem", Allocation: consuming(allocation("memdev"), "size", "10Gi")}},
		want:   map[string]map[string]string{"pod-mem": {"map:memory": "20Gi"}},
		ctrs:   map[string][]string{"pod-mem": {"init", "a"}},
	}, {
		name:   "capacity key without multiplier",
		claims: []Claim{{Entry: "mem", Name: "pod-mem", Allocation: consuming(allocation("memdev-1x"), "size", "3Gi")}},
		want:   map[string]map[string]string{"pod-mem": {"map:memory": "3Gi"}},
		ctrs:   map[string][]string{"pod-mem": {"init", "a"}},
	}, {
		name:   "capacity key the allocation did not consume adds nothing",
		claims: []Claim{{Entry: "mem", Name: "pod-mem", Allocation: consuming(allocation("memdev"), "other", "1Gi")}},
		want:   map[string]map[string]string{},
	}, {
		name:    "capacity key with no consumed capacity is an error",
		claims:  []Claim{{Entry: "mem", Name: "pod-mem", Allocation: allocation("memdev")}},
		wantErr: true,
	}, {
		name:   "overhead per pod and per container summed over devices",
		claims: []Claim{{Entry: "cpus", Name: "nics", Allocation: allocation("nic", "nic")}},
		want:   map[string]map[string]string{"nics": {"pod:memory": "200Mi", "ctr:memory": "20Mi", "pod:cpu": "200m"}},
		ctrs:   map[string][]string{"nics": {"a", "b"}},
	}, {
		name:   "claims without node resources have no status; sorted by claim name",
		claims: []Claim{{Entry: "cpus", Name: "z", Allocation: allocation("cpu-0")}, {Entry: "mem", Name: "plain", Allocation: allocation("plain")}, {Entry: "x", Name: "a", Allocation: allocation("cpu-1")}, {Entry: "y", Name: "unallocated"}},
		want:   map[string]map[string]string{"a": {"map:cpu": "4"}, "z": {"map:cpu": "4"}},
		ctrs:   map[string][]string{"a": {}, "z": {"a", "b"}},
	}, {
		name:    "an unknown device in a claim that declares node resources is an error",
		claims:  []Claim{{Entry: "cpus", Name: "c", Allocation: allocation("cpu-0", "gone")}},
		wantErr: true,
	}, {
		name:   "an unknown device alone is not looked at further",
		claims: []Claim{{Entry: "cpus", Name: "c", Allocation: allocation("gone")}},
		want:   map[string]map[string]string{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sts, err := Statuses(pod(), tc.claims, devs.devices)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %t", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if got := quantities(sts); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("quantities %v, want %v", got, tc.want)
			}
			for i, st := range sts {
				if i > 0 && sts[i-1].ResourceClaimName >= st.ResourceClaimName {
					t.Errorf("statuses not sorted: %s before %s", sts[i-1].ResourceClaimName, st.ResourceClaimName)
				}
				if want := tc.ctrs[st.ResourceClaimName]; !reflect.DeepEqual(st.Containers, want) {
					t.Errorf("claim %s containers %v, want %v", st.ResourceClaimName, st.Containers, want)
				}
			}
		})
	}
}

func TestMapped(t *testing.T) {
	devs := catalog{
		"cpu":  perDevice(corev1.ResourceCPU, "1"),
		"nic":  {corev1.ResourceMemory: {Overhead: &resourcev1.NodeAllocatableOverhead{PerPod: q("1Mi")}}},
		"none": nil,
	}
	for _, tc := range []struct {
		alloc *resourcev1.AllocationResult
		want  bool
	}{
		{nil, false},
		{allocation("none"), false},
		{allocation("nic"), false},
		{allocation("none", "cpu"), true},
		{allocation("gone", "nic"), false},
	} {
		if got := Mapped(tc.alloc, devs.devices); got != tc.want {
			t.Errorf("Mapped(%v) = %t, want %t", tc.alloc, got, tc.want)
		}
	}
}

func status(claim string, containers []string, mapped corev1.ResourceList, perPod, perCtr corev1.ResourceList) corev1.NodeAllocatableResourceClaimStatus {
	st := corev1.NodeAllocatableResourceClaimStatus{ResourceClaimName: claim, Containers: containers}
	for n, v := range mapped {
		st.Mapping = append(st.Mapping, corev1.NodeAllocatableMappedResources{Name: n, Quantity: ptr.To(v)})
	}
	names := map[corev1.ResourceName]bool{}
	for n := range perPod {
		names[n] = true
	}
	for n := range perCtr {
		names[n] = true
	}
	for n := range names {
		o := corev1.NodeAllocatableOverheadResources{Name: n}
		if v, ok := perPod[n]; ok {
			o.PerPod = ptr.To(v)
		}
		if v, ok := perCtr[n]; ok {
			o.PerContainer = ptr.To(v)
		}
		st.Overhead = append(st.Overhead, o)
	}
	return st
}

func TestDemandAndExtra(t *testing.T) {
	p := pod() // requests: init 1 CPU 1Gi; a, b 1 CPU 1Gi each
	sts := []corev1.NodeAllocatableResourceClaimStatus{
		status("cpus", []string{"a", "b"}, corev1.ResourceList{corev1.ResourceCPU: *q("8")}, nil, nil),
		status("nics", []string{"a", "b"}, nil, corev1.ResourceList{corev1.ResourceMemory: *q("100Mi")}, corev1.ResourceList{corev1.ResourceMemory: *q("10Mi")}),
	}
	d := Demand(p, sts, false)
	// Containers 2 CPU (more than the init container's 1), plus 8 mapped.
	if got := d[corev1.ResourceCPU]; got.Cmp(*q("10")) != 0 {
		t.Errorf("cpu demand %s, want 10", got.String())
	}
	// 2Gi + 100Mi per pod + 10Mi for each of two containers.
	if got := d[corev1.ResourceMemory]; got.Cmp(*q("2168Mi")) != 0 {
		t.Errorf("memory demand %s, want 2168Mi", got.String())
	}
	x := Extra(p, sts, false)
	if got := x[corev1.ResourceCPU]; got.Cmp(*q("8")) != 0 {
		t.Errorf("extra cpu %s, want 8", got.String())
	}
	if got := x[corev1.ResourceMemory]; got.Cmp(*q("120Mi")) != 0 {
		t.Errorf("extra memory %s, want 120Mi", got.String())
	}
	if len(Extra(p, nil, false)) != 0 {
		t.Errorf("no statuses add %v", Extra(p, nil, false))
	}
	// Pod-level requests, with the gate on, are the pod's whole budget:
	// they replace the containers' and claims' sum (PodLevelShortfall
	// checks that they cover it).
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *q("16")}}
	if got := Demand(p, sts, true)[corev1.ResourceCPU]; got.Cmp(*q("16")) != 0 {
		t.Errorf("cpu demand with pod-level request 16: %s, want 16", got.String())
	}
	if got := Demand(p, sts, false)[corev1.ResourceCPU]; got.Cmp(*q("10")) != 0 {
		t.Errorf("cpu demand with the gate off: %s, want 10", got.String())
	}
}

func TestPodLevelShortfall(t *testing.T) {
	sts := []corev1.NodeAllocatableResourceClaimStatus{
		status("cpus", []string{"a"}, corev1.ResourceList{corev1.ResourceCPU: *q("4")}, nil, nil),
	}
	for _, tc := range []struct {
		name   string
		res    *corev1.ResourceRequirements
		limitA corev1.ResourceList
		want   string
	}{{
		name: "no pod-level resources",
	}, {
		name: "requests cover containers and claims",
		res:  &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *q("6")}},
	}, {
		name: "requests short of containers plus claims",
		res:  &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *q("5")}},
		want: "pod level request for cpu is insufficient to cover the aggregated container and node-allocatable DRA requests",
	}, {
		name:   "a container's limit plus its claims over the pod's limit",
		res:    &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: *q("5")}},
		limitA: corev1.ResourceList{corev1.ResourceCPU: *q("2")},
		want:   "pod level limit for cpu is insufficient to cover the limit and DRA overhead for container a",
	}, {
		name:   "a container's limit plus its claims within the pod's limit",
		res:    &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: *q("6")}},
		limitA: corev1.ResourceList{corev1.ResourceCPU: *q("2")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod()
			p.Spec.Resources = tc.res
			p.Spec.Containers[0].Resources.Limits = tc.limitA
			if got := PodLevelShortfall(p, sts); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFit(t *testing.T) {
	alloc := AmountsOf(corev1.ResourceList{corev1.ResourceCPU: *q("8"), corev1.ResourceMemory: *q("8Gi"), "hugepages-2Mi": *q("1Gi"), "example.com/gpu": *q("1")})
	used := AmountsOf(corev1.ResourceList{corev1.ResourceCPU: *q("6"), corev1.ResourceMemory: *q("1Gi")})
	for _, tc := range []struct {
		name         string
		demand       corev1.ResourceList
		reasons      []string
		unresolvable bool
	}{
		{"fits", corev1.ResourceList{corev1.ResourceCPU: *q("2"), corev1.ResourceMemory: *q("7Gi")}, nil, false},
		{"cpu short, room after preemption", corev1.ResourceList{corev1.ResourceCPU: *q("3")}, []string{"Insufficient cpu"}, false},
		{"more than the node has", corev1.ResourceList{corev1.ResourceCPU: *q("9"), corev1.ResourceMemory: *q("8Gi")}, []string{"Insufficient cpu", "Insufficient memory"}, true},
		{"hugepages", corev1.ResourceList{"hugepages-2Mi": *q("2Gi")}, []string{"Insufficient hugepages-2Mi"}, true},
		{"other scalars are not this check's", corev1.ResourceList{"example.com/gpu": *q("4")}, nil, false},
		{"zero ephemeral storage is not checked", corev1.ResourceList{corev1.ResourceEphemeralStorage: *q("0")}, nil, false},
		{"ephemeral storage the node lacks", corev1.ResourceList{corev1.ResourceEphemeralStorage: *q("1")}, []string{"Insufficient ephemeral-storage"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reasons, unres := Fit(tc.demand, alloc, used)
			if !reflect.DeepEqual(reasons, tc.reasons) || unres != tc.unresolvable {
				t.Errorf("Fit = %v, %t; want %v, %t", reasons, unres, tc.reasons, tc.unresolvable)
			}
		})
	}
	if got := used.Add(used); got.MilliCPU != 12000 || got.Memory != 2<<30 {
		t.Errorf("Add: %+v", got)
	}
}
