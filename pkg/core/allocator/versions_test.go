package allocator

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/validation"
)

// minorOutcome is an outcome of Allocate, as the minor rules tell them apart: "fit
// <pool/device>...", "unfit", "fatal: <error>" (*FatalError), "node:
// <error>" (*NodeError).
func minorOutcome(res []*resourcev1.AllocationResult, err error) string {
	var fe *FatalError
	var ne *NodeError
	switch {
	case err == nil:
		var devs []string
		for _, r := range res {
			devs = append(devs, devices(r)...)
		}
		return "fit " + strings.Join(devs, " ")
	case IsUnfit(err):
		return "unfit"
	case errors.As(err, &ne):
		return "node: " + err.Error()
	case errors.As(err, &fe):
		return "fatal: " + err.Error()
	}
	return "error: " + err.Error()
}

// withVersion sets a version attribute on the slice's devices, in order.
func withVersion(s *api.ResourceSlice, name string, versions ...string) *api.ResourceSlice {
	for i, v := range versions {
		d := &s.Spec.Devices[i]
		if d.Attributes == nil {
			d.Attributes = map[api.QualifiedName]api.DeviceAttribute{}
		}
		d.Attributes[api.QualifiedName(name)] = api.DeviceAttribute{VersionValue: ptr.To(v)}
	}
	return s
}

// TestMinorRules gives each rule of minorRules an input on which 1.37's
// answer and 1.38's differ, and checks that the allocator gives each
// minor's, and the zero KubeVersion 1.37's.
func TestMinorRules(t *testing.T) {
	node := coretest.Node("node-1")
	oneGPU := func(devs ...*coretest.DeviceBuilder) []*api.ResourceSlice {
		return []*api.ResourceSlice{coretest.Slice("s").Driver(gpuDriver).Pool("p").Count(1).Node("node-1").Device(devs...).Obj()}
	}
	claim := func(r *coretest.RequestBuilder) *resourcev1.ResourceClaim {
		return coretest.Claim("c").Request(r).Obj()
	}
	var covered [numRules]bool
	for _, tc := range []struct {
		rule     int
		slices   []*api.ResourceSlice
		held     []*resourcev1.ResourceClaim
		features features.Set
		claim    *resourcev1.ResourceClaim
		// want137 and want138 are the outcomes, or their start for errors.
		want137, want138 string
	}{{
		rule: ruleAllPoolsNodeLocal,
		// The pool consumes a counter set nobody publishes: invalid.
		slices:  oneGPU(coretest.Device("gpu-0").Consumes("missing", "memory", "1")),
		claim:   claim(coretest.Request("r", "gpu").All()),
		want137: "fatal: claim default/c, request r: asks for all devices, but resource pool gpu.example.com/p is currently invalid",
		want138: "node: claim default/c, request r: asks for all devices, but resource pool gpu.example.com/p is currently invalid",
	}, {
		rule:    ruleCapacityDriverDomain,
		slices:  oneGPU(coretest.Device("gpu-0").Capacity("memory", "10Gi")),
		claim:   claim(coretest.Request("r", "gpu").Capacity(gpuDriver+"/memory", "5Gi")),
		want137: "unfit",
		want138: "fit r=p/gpu-0",
	}, {
		rule: ruleCapacityDriverDomain,
		// What an allocated share consumes counts under either spelling.
		slices: oneGPU(coretest.Device("gpu-0").Multi().Capacity(gpuDriver+"/memory", "10Gi")),
		held: []*resourcev1.ResourceClaim{coretest.Claim("held").Allocated(resourcev1.DeviceRequestAllocationResult{
			Request: "r", Driver: gpuDriver, Pool: "p", Device: "gpu-0", ShareID: ptrUID("s-1"),
			ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("8Gi")}}).Obj()},
		claim:   claim(coretest.Request("r", "gpu").Capacity(gpuDriver+"/memory", "5Gi")),
		want137: "fit r=p/gpu-0",
		want138: "unfit",
	}, {
		rule:    ruleCapacityDriverDomain,
		slices:  oneGPU(coretest.Device("gpu-0").Capacity("memory", "10Gi")),
		claim:   claim(coretest.Request("r", "gpu").Capacity("memory", "1Gi").Capacity(gpuDriver+"/memory", "1Gi")),
		want137: "unfit",
		want138: `fatal: claim default/c, request r: checking capacity for device gpu.example.com/p/gpu-0: capacity "memory" requested both as`,
	}, {
		rule: ruleVersionIgnoresBuild,
		slices: []*api.ResourceSlice{withVersion(coretest.Slice("s").Driver(gpuDriver).Pool("p").Count(1).Node("node-1").
			Device(coretest.Device("gpu-0"), coretest.Device("gpu-1")).Obj(), "driverVersion", "1.0.0+a", "1.0.0+b")},
		claim:   coretest.Claim("c").Request(coretest.Request("r", "gpu").Count(2)).MatchAttribute(gpuDriver + "/driverVersion").Obj(),
		want137: "unfit",
		want138: "fit r=p/gpu-0 r=p/gpu-1",
	}, {
		rule: ruleVersionIgnoresBuild,
		slices: []*api.ResourceSlice{withVersion(coretest.Slice("s").Driver(gpuDriver).Pool("p").Count(1).Node("node-1").
			Device(coretest.Device("gpu-0"), coretest.Device("gpu-1")).Obj(), "driverVersion", "1.0.0+a", "1.0.0+b")},
		claim:   coretest.Claim("c").Request(coretest.Request("r", "gpu").Count(2)).DistinctAttribute(gpuDriver + "/driverVersion").Obj(),
		want137: "fit r=p/gpu-0 r=p/gpu-1",
		want138: "unfit",
	}, {
		rule:     ruleListValueWithoutGate,
		slices:   oneGPU(coretest.Device("gpu-0").Strs("links", "a", "b"), coretest.Device("gpu-1").Strs("links", "b", "c")),
		features: features.All().With(features.ListTypeAttributes, false),
		claim:    coretest.Claim("c").Request(coretest.Request("r", "gpu").Count(2)).MatchAttribute(gpuDriver + "/links").Obj(),
		want137:  "unfit",
		want138:  "fatal: claim default/c, request r: device gpu.example.com/p/gpu-0: unsupported attribute value for gpu.example.com/links",
	}, {
		rule: ruleNegativeRequestRefused,
		slices: oneGPU(coretest.Device("gpu-0").Multi().CapacityPolicy("memory", "4", &resourcev1.CapacityRequestPolicy{
			ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: resource.NewQuantity(1, resource.DecimalSI)}})),
		claim:   claim(coretest.Request("r", "gpu").Capacity("memory", "-1")),
		want137: "fit r=p/gpu-0",
		want138: `fatal: claim default/c, request r: checking capacity for device gpu.example.com/p/gpu-0: capacity "memory": capacity value is negative`,
	}, {
		rule: ruleShareBlocksDedicated,
		// gpu-0 allowed multiple allocations when the share was made.
		slices: oneGPU(coretest.Device("gpu-0"), coretest.Device("gpu-1")),
		held: []*resourcev1.ResourceClaim{coretest.Claim("held").Allocated(resourcev1.DeviceRequestAllocationResult{
			Request: "r", Driver: gpuDriver, Pool: "p", Device: "gpu-0", ShareID: ptrUID("s-1")}).Obj()},
		claim:   claim(coretest.Request("r", "gpu")),
		want137: "fit r=p/gpu-0",
		want138: "fit r=p/gpu-1",
	}} {
		covered[tc.rule] = true
		t.Run(fmt.Sprintf("%d-%s", tc.rule, minorRules[tc.rule].what), func(t *testing.T) {
			for _, m := range []struct {
				v    validation.KubeVersion
				want string
			}{{validation.KubeVersion{}, tc.want137}, {validation.KubeVersion{Minor: 37}, tc.want137}, {validation.KubeVersion{Minor: 38}, tc.want138}} {
				e := &env{slices: tc.slices, classes: []*resourcev1.DeviceClass{gpuClass}, allocated: tc.held,
					opts: Options{KubeVersion: m.v, Features: tc.features}}
				got := minorOutcome(e.run(t, node, tc.claim))
				if !strings.HasPrefix(got, m.want) {
					t.Errorf("as %v (Minor %d): %s\nwant %s", m.v.Nearest(), m.v.Minor, got, m.want)
				}
			}
		})
	}
	for rule, ok := range covered {
		if !ok {
			t.Errorf("rule %d (%s) has no case", rule, minorRules[rule].what)
		}
	}
}

// TestMinorRulesDiffer: each rule changes something between the supported
// minors, which is what earns it a place in the table.
func TestMinorRulesDiffer(t *testing.T) {
	for rule, m := range minorRules {
		var on []bool
		for _, v := range validation.Supported() {
			r := rulesOf(v)
			on = append(on, r.has(rule))
		}
		if !strings.Contains(fmt.Sprint(on), "true") || !strings.Contains(fmt.Sprint(on), "false") {
			t.Errorf("rule %d (%s) is %v over %v: the same at every supported minor", rule, m.what, on, validation.Supported())
		}
		if m.what == "" {
			t.Errorf("rule %d has no description", rule)
		}
	}
	if rulesOf(validation.KubeVersion{}) != rulesOf(validation.KubeVersion{Minor: 37}) {
		t.Error("the zero KubeVersion does not judge as 1.37")
	}
}
