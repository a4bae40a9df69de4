// Package bench holds the allocator benchmark workloads and runs them per
// scheduling cycle on upstream (incubating and experimental variants) and
// on dractl's incremental State, and measures dractl's deltas.
package bench

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/conformance/gen"
	"github.com/dractl/dractl/conformance/scenario"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/driver/mig"
)

// Workload is one benchmark row: a cluster state and the claims of one
// pod. An op is one scheduling cycle on one node (Nodes round-robin): the
// previous cycle's delta (Churn allocated on even ops, released on odd
// ones, so the state stays put), a snapshot, the pod's claims prepared and
// allocated on the node. A Filter row measures Filter alone: the claims
// are prepared once and an op allocates them on the next node.
type Workload struct {
	Name     string
	Scenario *scenario.Scenario
	Nodes    []*corev1.Node
	Churn    *resourcev1.ResourceClaim
	Filter   bool
	// Memoize: dractl's State remembers each node's answer, as the
	// scheduler plugin's does (state.Options.MemoizeNodes); upstream has
	// nothing of the kind and runs as in the other rows.
	Memoize bool
}

func classes() []*resourcev1.DeviceClass {
	return []*resourcev1.DeviceClass{
		coretest.Class("mig", gen.DriverIs(gen.GPUDriver)+" && "+gen.AttrIs(gen.GPUDriver, "type", "mig")),
		coretest.Class("gpu", gen.DriverIs(gen.GPUDriver)),
		coretest.Class("plain", gen.DriverIs(gen.PlainDriver)),
		coretest.Class("tpu", gen.DriverIs(gen.TPUDriver)),
	}
}

// allocated returns a claim holding the given devices of one pool.
func allocated(name, driver, pool string, devices ...string) *resourcev1.ResourceClaim {
	var results []resourcev1.DeviceRequestAllocationResult
	for _, d := range devices {
		results = append(results, coretest.Result("r", driver, pool, d))
	}
	c := coretest.Claim(name).Request(coretest.Request("r", "any").Count(int64(len(devices)))).Allocated(results...).Obj()
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

// churn is the claim the previous cycle allocated: the 1g.10gb device
// at memory slice start of the GPU, which takes counters from the GPU's
// counter set as a scheduler's last allocation does.
func churn(node string, gpu, start int) *resourcev1.ResourceClaim {
	return allocated("churn", gen.GPUDriver, "gpu-"+node, mig.MIGDeviceName(gpu, "1g.10gb", start))
}

// MIG1g: one 1g.10gb MIG device on an 8×H100 node at pct fill.
func MIG1g(pct int) Workload {
	n, slices := h100Node("node-0")
	return Workload{
		Name: fmt.Sprintf("8×H100 MIG node, 1×1g.10gb, %d %% used", pct),
		Scenario: &scenario.Scenario{Name: "mig1g", Nodes: []*corev1.Node{n}, Classes: classes(), Slices: slices,
			Allocated: fill1g("node-0", pct), Claims: []*resourcev1.ResourceClaim{gen.Claim("c", gen.Exact("r", "mig", 1, oneG))}},
		Nodes: []*corev1.Node{n},
		Churn: churn("node-0", 7, 6),
	}
}

// MIG4Match: four 1g requests constrained to the same parent GPU.
func MIG4Match(pct int) Workload {
	n, slices := h100Node("node-0")
	c := gen.Claim("c", gen.Exact("a", "mig", 1, oneG), gen.Exact("b", "mig", 1, oneG), gen.Exact("c", "mig", 1, oneG), gen.Exact("d", "mig", 1, oneG))
	gen.MatchAttribute(c, gen.GPUDriver+"/parent")
	return Workload{
		Name: fmt.Sprintf("4 requests (1g each) + matchAttribute parent GPU, %d %% used", pct),
		Scenario: &scenario.Scenario{Name: "mig4", Nodes: []*corev1.Node{n}, Classes: classes(), Slices: slices,
			Allocated: fill1g("node-0", pct), Claims: []*resourcev1.ResourceClaim{c}},
		Nodes: []*corev1.Node{n},
		Churn: churn("node-0", 7, 6),
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
		Name: fmt.Sprintf("matchAttribute count %d, only GPU 7 fits", count),
		Scenario: &scenario.Scenario{Name: "backtrack", Nodes: []*corev1.Node{n}, Classes: classes(), Slices: slices,
			Allocated: alloc, Claims: []*resourcev1.ResourceClaim{c}},
		Nodes: []*corev1.Node{n},
		Churn: churn("node-0", 0, 6),
	}
}

// H100Cluster is nodes 8×H100 nodes and a claim for one 1g.10gb device.
// As a Filter row an op is one node's Filter; otherwise it is a whole
// cycle (the previous cycle's claim, a snapshot, the claim prepared, one
// node).
func H100Cluster(nodes int, filter bool) Workload {
	sc := &scenario.Scenario{Name: fmt.Sprintf("h100-%d", nodes), Classes: classes()}
	for i := 0; i < nodes; i++ {
		n, slices := h100Node(fmt.Sprintf("node-%04d", i))
		sc.Nodes = append(sc.Nodes, n)
		sc.Slices = append(sc.Slices, slices...)
	}
	sc.Claims = []*resourcev1.ResourceClaim{gen.Claim("c", gen.Exact("r", "mig", 1, oneG))}
	w := Workload{Name: H100ClusterName(nodes, filter), Scenario: sc, Nodes: sc.Nodes, Filter: filter}
	if !filter {
		w.Churn = churn("node-0000", 7, 6)
	}
	return w
}

// H100FilterRemembered is H100Cluster's Filter row with dractl's State
// remembering answers, as the plugin's does: in a scheduler's cycle every
// node but the one the last pod went to gives its remembered answer.
func H100FilterRemembered(nodes int) Workload {
	w := H100Cluster(nodes, true)
	w.Name += ", answers remembered as in the plugin"
	w.Memoize = true
	return w
}

// H100ClusterName is the name of H100Cluster's row.
func H100ClusterName(nodes int, filter bool) string {
	if filter {
		return fmt.Sprintf("Filter for one node, %d such nodes", nodes)
	}
	return fmt.Sprintf("whole cycle on %d such nodes", nodes)
}

// Row is one row of the table, built on demand: the cluster rows hold
// hundreds of thousands of devices.
type Row struct {
	Name string
	Make func() Workload
}

func row(make func() Workload) Row { return Row{Name: make().Name, Make: make} }

// All returns every row in table order.
func All() []Row {
	return []Row{
		row(func() Workload { return MIG1g(0) }),
		row(func() Workload { return MIG1g(90) }),
		row(func() Workload { return MIG4Match(90) }),
		row(func() Workload { return Backtrack(6) }),
		row(func() Workload { return Backtrack(7) }),
		{Name: H100ClusterName(100, true), Make: func() Workload { return H100Cluster(100, true) }},
		{Name: H100ClusterName(1000, true), Make: func() Workload { return H100Cluster(1000, true) }},
		row(func() Workload { return H100FilterRemembered(1000) }),
		{Name: H100ClusterName(100, false), Make: func() Workload { return H100Cluster(100, false) }},
		{Name: H100ClusterName(1000, false), Make: func() Workload { return H100Cluster(1000, false) }},
	}
}
