// Package bench holds the allocator benchmark workloads and runs them on
// upstream (stable and experimental variants) and dractl, cold and warm.
package bench

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/conformance/gen"
	"github.com/dractl/dractl/conformance/scenario"
	"github.com/dractl/dractl/internal/examplegen"
	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/mig"
)

// Workload is one benchmark row: a cluster state and the claims of one
// scheduling attempt, evaluated on Nodes (round-robin, one node per op).
type Workload struct {
	Name     string
	Scenario *scenario.Scenario
	Nodes    []*corev1.Node
}

func classes() []*resourcev1.DeviceClass {
	return []*resourcev1.DeviceClass{
		gen.Class("mig", gen.DriverIs(gen.GPUDriver)+" && "+gen.AttrIs(gen.GPUDriver, "type", "mig")),
		gen.Class("gpu", gen.DriverIs(gen.GPUDriver)),
		gen.Class("plain", gen.DriverIs(gen.PlainDriver)),
		gen.Class("tpu", gen.DriverIs(gen.TPUDriver)),
	}
}

// allocated returns a claim holding the given devices of one pool.
func allocated(name, driver, pool string, devices ...string) *resourcev1.ResourceClaim {
	c := gen.Claim(name, gen.Exact("r", "any", int64(len(devices))))
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: "r", Driver: driver, Pool: pool, Device: d,
		})
	}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p-" + name, UID: types.UID("uid-p-" + name)}}
	return c
}

// h100Node is one node with 8 H100-like GPUs: 8 counter sets, each GPU as
// a full device plus 18 MIG placements, 152 devices in 2 slices.
func h100Node(node string) (*corev1.Node, []*api.ResourceSlice) {
	return gen.Node(node, map[string]string{"rack": "r0", "block": "b0"}), gen.MIGPool(node, 8, gen.Profiles, 2, false)
}

// fill1g allocates the first pct % of the 56 1g.10gb placements, GPU by GPU.
func fill1g(node string, pct int) []*resourcev1.ResourceClaim {
	n := 56 * pct / 100
	var out []*resourcev1.ResourceClaim
	for i := 0; i < n; i++ {
		out = append(out, allocated(fmt.Sprintf("fill-%d", i), gen.GPUDriver, "gpu-"+node, mig.MIGDeviceName(i/7, "1g.10gb", i%7)))
	}
	return out
}

var oneG = gen.AttrIs(gen.GPUDriver, "profile", "1g.10gb")

// MIG1g: one 1g.10gb MIG device on an 8×H100 node at pct fill.
func MIG1g(pct int) Workload {
	n, slices := h100Node("node-0")
	return Workload{
		Name: fmt.Sprintf("MIG 1×1g, %d %% full", pct),
		Scenario: &scenario.Scenario{Name: "mig1g", Nodes: []*corev1.Node{n}, Classes: classes(), Slices: slices,
			Allocated: fill1g("node-0", pct), Claims: []*resourcev1.ResourceClaim{gen.Claim("c", gen.Exact("r", "mig", 1, oneG))}},
		Nodes: []*corev1.Node{n},
	}
}

// MIG4Match: four 1g requests constrained to the same parent GPU.
func MIG4Match(pct int) Workload {
	n, slices := h100Node("node-0")
	c := gen.Claim("c", gen.Exact("a", "mig", 1, oneG), gen.Exact("b", "mig", 1, oneG), gen.Exact("c", "mig", 1, oneG), gen.Exact("d", "mig", 1, oneG))
	gen.MatchAttribute(c, gen.GPUDriver+"/parent")
	return Workload{
		Name: fmt.Sprintf("MIG 4 requests + matchAttribute parent, %d %% full", pct),
		Scenario: &scenario.Scenario{Name: "mig4", Nodes: []*corev1.Node{n}, Classes: classes(), Slices: slices,
			Allocated: fill1g("node-0", pct), Claims: []*resourcev1.ResourceClaim{c}},
		Nodes: []*corev1.Node{n},
	}
}

// Backtrack: one request for count MIG devices (any profile) with
// matchAttribute on the parent GPU; GPUs 0..6 have room for only count-1
// devices left (their first memory slices hold 1g devices), so only GPU 7
// can hold the request and first-fit must exhaust GPUs 0..6 first.
func Backtrack(count int) Workload {
	n, slices := h100Node("node-0")
	var alloc []*resourcev1.ResourceClaim
	for g := 0; g < 7; g++ {
		for s := 0; s < 8-count; s++ {
			alloc = append(alloc, allocated(fmt.Sprintf("fill-%d-%d", g, s), gen.GPUDriver, "gpu-node-0", mig.MIGDeviceName(g, "1g.10gb", s)))
		}
	}
	c := gen.Claim("c", gen.Exact("r", "mig", int64(count)))
	gen.MatchAttribute(c, gen.GPUDriver+"/parent")
	return Workload{
		Name: fmt.Sprintf("backtracking: count %d + matchAttribute parent, only GPU 7 fits", count),
		Scenario: &scenario.Scenario{Name: "backtrack", Nodes: []*corev1.Node{n}, Classes: classes(), Slices: slices,
			Allocated: alloc, Claims: []*resourcev1.ResourceClaim{c}},
		Nodes: []*corev1.Node{n},
	}
}

// Plain1000: 1,000 plain devices in 8 slices, the first half allocated,
// a claim for 4 devices.
func Plain1000() Workload {
	node := gen.Node("node-0", nil)
	var slices []*api.ResourceSlice
	var held []string
	for k := 0; k < 8; k++ {
		s := gen.Slice(fmt.Sprintf("plain-%d", k), gen.PlainDriver, "plain-node-0", 8)
		s.Spec.NodeName = ptr.To("node-0")
		for j := 0; j < 125; j++ {
			name := fmt.Sprintf("dev-%d-%03d", k, j)
			s.Spec.Devices = append(s.Spec.Devices, api.Device{Name: name, Attributes: map[api.QualifiedName]api.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(k*125 + j))}, "color": {StringValue: ptr.To([]string{"red", "green", "blue", "white"}[j%4])},
			}})
			if k < 4 {
				held = append(held, name)
			}
		}
		slices = append(slices, s)
	}
	return Workload{
		Name: "1,000 plain devices in 8 slices, 50 % allocated, 4 devices",
		Scenario: &scenario.Scenario{Name: "plain1000", Nodes: []*corev1.Node{node}, Classes: classes(), Slices: slices,
			Allocated: []*resourcev1.ResourceClaim{allocated("held", gen.PlainDriver, "plain-node-0", held...)},
			Claims:    []*resourcev1.ResourceClaim{gen.Claim("c", gen.Exact("r", "plain", 4, gen.AttrIs(gen.PlainDriver, "color", "red")))}},
		Nodes: []*corev1.Node{node},
	}
}

// Cluster: nodes nodes, each with 2 MIG GPUs (38 devices, 2 slices); one
// claim for a 1g device; the op is one node (per-node cost).
func Cluster(nodes int) Workload {
	sc := &scenario.Scenario{Name: fmt.Sprintf("cluster%d", nodes), Classes: classes()}
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%04d", i)
		sc.Nodes = append(sc.Nodes, gen.Node(name, map[string]string{"rack": fmt.Sprintf("r%d", i%10)}))
		sc.Slices = append(sc.Slices, gen.MIGPool(name, 2, gen.Profiles, 1, false)...)
	}
	sc.Claims = []*resourcev1.ResourceClaim{gen.Claim("c", gen.Exact("r", "mig", 1, oneG))}
	return Workload{Name: fmt.Sprintf("%d-node cluster, 38 devices per node, 1g (per node)", nodes), Scenario: sc, Nodes: sc.Nodes}
}

// TPU: a multi-host pool over 8 hosts with per-host chip counters: 1x1
// chips, 2x2 per host, 2x4 per host pair, 4x4 per four hosts, 8x4 for all;
// hosts 0..3 have half their chips allocated; the claim wants a 4x4.
func TPU() Workload {
	sc := &scenario.Scenario{Name: "tpu", Classes: classes()}
	const hosts = 8
	sel := func(key, val string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{val}}}}}}
	}
	cs := gen.Slice("tpu-counters", gen.TPUDriver, "tpu-block", 2)
	cs.Spec.NodeSelector = sel("block", "b0")
	ds := gen.Slice("tpu-devices", gen.TPUDriver, "tpu-block", 2)
	ds.Spec.PerDeviceNodeSelection = ptr.To(true)
	chips := func(hs ...int) []api.DeviceCounterConsumption {
		var out []api.DeviceCounterConsumption
		per := int64(4)
		if len(hs) == 0 {
			return nil
		}
		for _, h := range hs {
			out = append(out, api.DeviceCounterConsumption{CounterSet: fmt.Sprintf("host-%d", h), Counters: map[string]api.Counter{"chips": {Value: *resourceQ(per)}}})
		}
		return out
	}
	topo := func(t string) map[api.QualifiedName]api.DeviceAttribute {
		return map[api.QualifiedName]api.DeviceAttribute{"topology": {StringValue: ptr.To(t)}, "block": {StringValue: ptr.To("b0")}}
	}
	var held []string
	for h := 0; h < hosts; h++ {
		name := fmt.Sprintf("host-%d", h)
		sc.Nodes = append(sc.Nodes, gen.Node(name, map[string]string{"block": "b0", "pair": fmt.Sprintf("p%d", h/2), "quad": fmt.Sprintf("q%d", h/4)}))
		cs.Spec.SharedCounters = append(cs.Spec.SharedCounters, api.CounterSet{Name: name, Counters: map[string]api.Counter{"chips": {Value: *resourceQ(4)}}})
		for c := 0; c < 4; c++ {
			d := api.Device{Name: fmt.Sprintf("tpu-%d-1x1-%d", h, c), Attributes: topo("1x1"), NodeName: ptr.To(name),
				ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: name, Counters: map[string]api.Counter{"chips": {Value: *resourceQ(1)}}}}}
			ds.Spec.Devices = append(ds.Spec.Devices, d)
			if h < 4 && c < 2 {
				held = append(held, d.Name)
			}
		}
		ds.Spec.Devices = append(ds.Spec.Devices, api.Device{Name: fmt.Sprintf("tpu-%d-2x2", h), Attributes: topo("2x2"), NodeName: ptr.To(name), ConsumesCounters: chips(h)})
	}
	for p := 0; p < hosts/2; p++ {
		ds.Spec.Devices = append(ds.Spec.Devices, api.Device{Name: fmt.Sprintf("tpu-p%d-2x4", p), Attributes: topo("2x4"), NodeSelector: sel("pair", fmt.Sprintf("p%d", p)), ConsumesCounters: chips(2*p, 2*p+1)})
	}
	for q := 0; q < hosts/4; q++ {
		ds.Spec.Devices = append(ds.Spec.Devices, api.Device{Name: fmt.Sprintf("tpu-q%d-4x4", q), Attributes: topo("4x4"), NodeSelector: sel("quad", fmt.Sprintf("q%d", q)), ConsumesCounters: chips(4*q, 4*q+1, 4*q+2, 4*q+3)})
	}
	// Upstream limits consumptions per device; 8 hosts would exceed it, so
	// the full-block device is left out.
	sc.Slices = []*api.ResourceSlice{cs, ds}
	sc.Allocated = []*resourcev1.ResourceClaim{allocated("held", gen.TPUDriver, "tpu-block", held...)}
	sc.Claims = []*resourcev1.ResourceClaim{gen.Claim("c", gen.Exact("r", "tpu", 1, gen.AttrIs(gen.TPUDriver, "topology", "4x4")))}
	return Workload{Name: "TPU multi-host pool (8 hosts, per-device node selection), 4x4", Scenario: sc, Nodes: sc.Nodes[4:]}
}

// DGX is the dgx-h100-mixins example (examplegen) in the given form, one
// 1g.10gb claim. dractl reads the form as written (mixins resolved lazily);
// upstream gets the flattened v1 slices either way, so its two rows must
// match and dractl's show what reading mixins lazily costs.
func DGX(form examplegen.Form) Workload {
	n := examplegen.DGXH100Node
	node := gen.Node(n.Node, nil)
	var cls []*resourcev1.DeviceClass
	for _, c := range examplegen.NVIDIAClasses() {
		cls = append(cls, c.(*resourcev1.DeviceClass))
	}
	claim := gen.Claim("c", gen.Exact("r", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"))
	return Workload{
		Name: fmt.Sprintf("DGX H100 example (152 devices), %s form, 1g.10gb", form),
		Scenario: &scenario.Scenario{Name: "dgx-" + form.String(), Nodes: []*corev1.Node{node}, Classes: cls,
			Slices: n.Slices(form), Claims: []*resourcev1.ResourceClaim{claim}},
		Nodes: []*corev1.Node{node},
	}
}

// All returns every row in table order.
func All() []Workload {
	var out []Workload
	for _, p := range []int{0, 50, 90} {
		out = append(out, MIG1g(p))
	}
	for _, p := range []int{0, 50, 90} {
		out = append(out, MIG4Match(p))
	}
	for c := 3; c <= 7; c++ {
		out = append(out, Backtrack(c))
	}
	out = append(out, Plain1000(), Cluster(100), Cluster(1000), TPU(), DGX(examplegen.Flat), DGX(examplegen.Mixins))
	return out
}

func resourceQ(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.DecimalSI) }
