package verify

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/conformance/gen"
	"github.com/dractl/dractl/conformance/scenario"
	"github.com/dractl/dractl/pkg/core/coretest"
)

func result(devs ...[2]string) *resourcev1.AllocationResult {
	r := &resourcev1.AllocationResult{}
	for _, d := range devs {
		r.Devices.Results = append(r.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: d[0], Driver: gen.GPUDriver, Pool: "gpu-node-0", Device: d[1]})
	}
	return r
}

// The verifier must reject broken results, or passing it means nothing.
func TestVerifierRejects(t *testing.T) {
	n := gen.Node("node-0", nil)
	other := gen.Node("node-1", nil)
	sc := &scenario.Scenario{
		Nodes:   nil,
		Classes: []*resourcev1.DeviceClass{coretest.Class("gpu", gen.DriverIs(gen.GPUDriver)), coretest.Class("mig", gen.AttrIs(gen.GPUDriver, "type", "mig"))},
		Slices:  gen.MIGPool("node-0", 2, gen.Profiles, 2, true),
	}
	_ = sc.Nodes
	two := gen.Claim("c", gen.Exact("a", "gpu", 1), gen.Exact("b", "gpu", 1))
	gen.MatchAttribute(two, gen.GPUDriver+"/parent")
	mig := gen.Claim("m", gen.Exact("a", "mig", 1))
	v, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		node   *corev1.Node
		claims []*resourcev1.ResourceClaim
		res    []*resourcev1.AllocationResult
		want   string // substring of a violation; "" = valid
	}{
		{"valid", n, []*resourcev1.ResourceClaim{two}, []*resourcev1.AllocationResult{result([2]string{"a", "gpu-0-mig-1g-10gb-0"}, [2]string{"b", "gpu-0-mig-1g-10gb-1"})}, ""},
		{"counters", n, []*resourcev1.ResourceClaim{two}, []*resourcev1.AllocationResult{result([2]string{"a", "gpu-0"}, [2]string{"b", "gpu-0-mig-1g-10gb-1"})}, "consumed of"},
		{"overlap", n, []*resourcev1.ResourceClaim{two}, []*resourcev1.AllocationResult{result([2]string{"a", "gpu-0-mig-1g-20gb-0"}, [2]string{"b", "gpu-0-mig-1g-10gb-1"})}, "memory-slice-1"},
		{"match", n, []*resourcev1.ResourceClaim{two}, []*resourcev1.AllocationResult{result([2]string{"a", "gpu-0-mig-1g-10gb-0"}, [2]string{"b", "gpu-1-mig-1g-10gb-1"})}, "matchAttribute"},
		{"twice", n, []*resourcev1.ResourceClaim{two}, []*resourcev1.AllocationResult{result([2]string{"a", "gpu-0-mig-1g-10gb-0"}, [2]string{"b", "gpu-0-mig-1g-10gb-0"})}, "also allocated"},
		{"count", n, []*resourcev1.ResourceClaim{two}, []*resourcev1.AllocationResult{result([2]string{"a", "gpu-0-mig-1g-10gb-0"})}, "want 1"},
		{"selector", n, []*resourcev1.ResourceClaim{mig}, []*resourcev1.AllocationResult{result([2]string{"a", "gpu-0"})}, "selectors"},
		{"node", other, []*resourcev1.ResourceClaim{mig}, []*resourcev1.AllocationResult{result([2]string{"a", "gpu-0-mig-1g-10gb-0"})}, "not accessible"},
		{"missing", n, []*resourcev1.ResourceClaim{mig}, []*resourcev1.AllocationResult{result([2]string{"a", "gpu-9"})}, "does not exist"},
	} {
		got := strings.Join(v.Check(ctx, tc.node, tc.claims, tc.res), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: violations %q, want %q", tc.name, got, tc.want)
		}
	}
}
