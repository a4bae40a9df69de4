package simulate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/podclaims"
)

func TestGeneratedStream(t *testing.T) {
	a := mustStream(t, migWorkload(5, 2000, 10*time.Second, time.Hour))
	b := mustStream(t, migWorkload(5, 2000, 10*time.Second, time.Hour))
	c := mustStream(t, migWorkload(6, 2000, 10*time.Second, time.Hour))
	same, differ := true, false
	kinds := map[string]int{}
	var lifetime time.Duration
	for i := range a.Pods {
		x, y, z := a.Pods[i], b.Pods[i], c.Pods[i]
		same = same && x.Name == y.Name && x.Arrive == y.Arrive && x.Lifetime == y.Lifetime
		differ = differ || x.Kind != z.Kind || x.Arrive != z.Arrive
		if i > 0 && x.Arrive < a.Pods[i-1].Arrive {
			t.Fatalf("pod %d arrives before pod %d", i, i-1)
		}
		kinds[x.Kind]++
		lifetime += x.Lifetime
		if len(x.Claims) != 1 || x.Claims[0].GenerateName != podclaims.GenerateName(x.Name.Name, x.Kind) {
			t.Fatalf("pod %s has claims %v", x.Name, x.Claims)
		}
	}
	if !same || !differ {
		t.Fatalf("same seed same stream: %v; other seed other stream: %v", same, differ)
	}
	// Weights 6:3:3:2:1:1 of 2,000 pods; means 10s apart and 1h long.
	if n := kinds["1g-10gb"]; n < 650 || n > 850 {
		t.Errorf("%d pods of weight 6/16, want about 750", n)
	}
	if n := kinds["7g-80gb"]; n < 80 || n > 170 {
		t.Errorf("%d pods of weight 1/16, want about 125", n)
	}
	if mean := a.Pods[len(a.Pods)-1].Arrive / time.Duration(len(a.Pods)); mean < 9*time.Second || mean > 11*time.Second {
		t.Errorf("mean gap %v, want about 10s", mean)
	}
	if mean := lifetime / time.Duration(len(a.Pods)); mean < 54*time.Minute || mean > 66*time.Minute {
		t.Errorf("mean lifetime %v, want about 1h", mean)
	}
}

func TestClassify(t *testing.T) {
	req := func(alone bool, rejected map[allocator.Reason]int) *allocator.Explanation {
		return &allocator.Explanation{Claims: []allocator.ClaimExplanation{{Requests: []allocator.RequestExplanation{{SatisfiableAlone: alone, Rejected: rejected}}}}}
	}
	for name, tc := range map[string]struct {
		expls   []*allocator.Explanation
		reason  string
		summary string
	}{
		"no pools": {nil, ReasonNoPools, "0/3 nodes fit: no node sees any resource pool"},
		"overlap": {[]*allocator.Explanation{req(false, map[allocator.Reason]int{allocator.ReasonAllocated: 30, allocator.ReasonSelector: 100, allocator.ReasonCounterExhausted: 2})},
			"CounterExhausted", "0/3 nodes fit: 1 CounterExhausted"},
		"all taken": {[]*allocator.Explanation{req(false, map[allocator.Reason]int{allocator.ReasonAllocated: 30, allocator.ReasonSelector: 100})},
			"Allocated", "0/3 nodes fit: 1 Allocated"},
		"nothing matches": {[]*allocator.Explanation{req(false, map[allocator.Reason]int{allocator.ReasonDriverOrClass: 5, allocator.ReasonSelector: 9})},
			ReasonNoMatchingDevice, "0/3 nodes fit: 1 NoMatchingDevice"},
		"together": {[]*allocator.Explanation{req(true, nil)}, ReasonTogether, "0/3 nodes fit: 1 Together"},
		"most nodes win": {[]*allocator.Explanation{
			req(false, map[allocator.Reason]int{allocator.ReasonTaint: 1}),
			req(false, map[allocator.Reason]int{allocator.ReasonCounterExhausted: 1}),
			req(false, map[allocator.Reason]int{allocator.ReasonCounterExhausted: 4}),
		}, "CounterExhausted", "0/3 nodes fit: 2 CounterExhausted, 1 Taint"},
	} {
		var reasons []string
		for _, e := range tc.expls {
			reasons = append(reasons, nodeReason(e))
		}
		reason, summary := classify(reasons, 3)
		if reason != tc.reason || summary != tc.summary {
			t.Errorf("%s: %s %q, want %s %q", name, reason, summary, tc.reason, tc.summary)
		}
	}
}

// TestPriority: a Workload's mix entry gives its pods its priority; a Pod
// read from a file keeps its spec.priority.
func TestPriority(t *testing.T) {
	set := migWorkload(1, 200, time.Second, 0)
	w := set.Workloads[0]
	w.Spec.Mix[0].Priority = 7
	prio := int32(-3)
	set.Pods = append(set.Pods, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{Priority: &prio, ResourceClaims: []corev1.PodResourceClaim{{Name: "c", ResourceClaimTemplateName: &set.ClaimTemplates[0].Name}}},
	})
	s := mustStream(t, set)
	seen := map[int32]bool{}
	for _, p := range s.Pods {
		want := int32(0)
		switch {
		case p.Name.Name == "p":
			want = -3
		case p.Kind == w.Spec.Mix[0].Name:
			want = 7
		}
		if p.Priority != want {
			t.Fatalf("pod %s (%s) has priority %d, want %d", p.Name, p.Kind, p.Priority, want)
		}
		seen[p.Priority] = true
	}
	if len(seen) != 3 {
		t.Fatalf("priorities seen: %v", seen)
	}
}

// TestExtendedResourcePods: a Pod asking for an extended resource that a
// DeviceClass backs arrives with the claim kube-scheduler would make for
// it; one asking only for resources no class backs has nothing for DRA.
func TestExtendedResourcePods(t *testing.T) {
	set := migWorkload(1, 200, time.Second, 0)
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"}}
	class.Spec.ExtendedResourceName = ptr.To("example.com/gpu")
	set.Classes = append(set.Classes, class)
	pod := func(name, resource string) *corev1.Pod {
		rl := corev1.ResourceList{corev1.ResourceName(resource): apiresource.MustParse("2")}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
		}
	}
	set.Pods = append(set.Pods, pod("backed", "example.com/gpu"), pod("unbacked", "example.com/fpga"))
	s := mustStream(t, set)
	var found bool
	for _, p := range s.Pods {
		switch p.Name.Name {
		case "unbacked":
			t.Errorf("a pod asking only for an unbacked extended resource arrived with claims %v", p.Claims)
		case "backed":
			found = true
			if len(p.Claims) != 1 {
				t.Fatalf("claims %v, want the extended-resource claim", p.Claims)
			}
			c := p.Claims[0]
			if c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" || len(c.Spec.Devices.Requests) != 1 ||
				c.Spec.Devices.Requests[0].Exactly.DeviceClassName != class.Name || c.Spec.Devices.Requests[0].Exactly.Count != 2 {
				t.Errorf("claim %+v", c)
			}
		}
	}
	if !found {
		t.Fatal("the pod asking for a backed extended resource did not arrive")
	}
}
