package allocator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/pool"
	migtable "github.com/dractl/dractl/pkg/driver/mig"
)

const gpuDriver = "gpu.example.com"

// env is one test cluster.
type env struct {
	slices    []*api.ResourceSlice
	classes   []*resourcev1.DeviceClass
	allocated []*resourcev1.ResourceClaim
	opts      Options
}

func (e *env) alloc(t testing.TB) *Allocator {
	t.Helper()
	if e.opts.NewShareID == nil {
		n := 0
		e.opts.NewShareID = func() types.UID { n++; return types.UID(fmt.Sprintf("share-%d", n)) }
	}
	a, err := New(Input{Pools: pool.Assemble(e.slices), Classes: e.classes, Allocated: e.allocated}, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (e *env) run(t testing.TB, node *corev1.Node, claims ...*resourcev1.ResourceClaim) ([]*resourcev1.AllocationResult, error) {
	t.Helper()
	return e.alloc(t).Allocate(context.Background(), node, claims)
}

// devices lists "pool/device" per request of one result.
func devices(r *resourcev1.AllocationResult) []string {
	var out []string
	for _, d := range r.Devices.Results {
		out = append(out, d.Request+"="+d.Pool+"/"+d.Device)
	}
	return out
}

var (
	gpuClass = coretest.Class("gpu", `device.driver == "gpu.example.com"`)
	migClass = coretest.Class("mig", `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "mig"`)
	anyClass = coretest.Class("any")
)

// gpuNode adds the slices of one node with n H100s (pkg/driver/mig's table), each
// its own counter set with the whole GPU and its 18 MIG placements as
// devices (KEP-4815's MIG example), smallest profile first.
func gpuNode(node string, n int) []*api.ResourceSlice {
	m := &migtable.H100
	cs := coretest.Slice(node + "-counters").Driver(gpuDriver).Pool(node).Count(2).Node(node)
	ds := coretest.Slice(node + "-devices").Driver(gpuDriver).Pool(node).Count(2).Node(node)
	for g := 0; g < n; g++ {
		set := fmt.Sprintf("gpu-%d-counters", g)
		cs.Counters(set, counterKV(m.SharedCounters())...)
		parent := fmt.Sprintf("%s-gpu-%d", node, g)
		ds.Device(coretest.Device(fmt.Sprintf("gpu-%d", g)).Str("type", "gpu").Str("parentUUID", parent).
			Str("profile", "full").Consumes(set, counterKV(m.SharedCounters())...))
		for _, p := range m.SmallestFirst() {
			for _, start := range p.Placements {
				c := p.Counters()
				for s := start; s < start+p.MemorySlices; s++ {
					c[migtable.MemorySliceCounter(s)] = api.Counter{Value: resource.MustParse("1")}
				}
				ds.Device(coretest.Device(fmt.Sprintf("gpu-%d-mig-%s-%d", g, p.Name, start)).Str("type", "mig").
					Str("parentUUID", parent).Str("profile", p.Name).Int("placement", int64(start)).Consumes(set, counterKV(c)...))
			}
		}
	}
	return []*api.ResourceSlice{cs.Obj(), ds.Obj()}
}

// counterKV spells counters as the builders take them: name, quantity, ...
func counterKV(c map[string]api.Counter) []string {
	var kv []string
	for _, name := range slices.Sorted(maps.Keys(c)) {
		v := c[name].Value
		kv = append(kv, name, v.String())
	}
	return kv
}

// fullGPUsAllocated marks the first k whole GPUs of a node as allocated.
func fullGPUsAllocated(node string, k int) *resourcev1.ResourceClaim {
	var rs []resourcev1.DeviceRequestAllocationResult
	for g := 0; g < k; g++ {
		rs = append(rs, coretest.Result("r", gpuDriver, node, fmt.Sprintf("gpu-%d", g)))
	}
	return coretest.Claim("busy-" + node).Allocated(rs...).Obj()
}

func mig(name, profile string) *coretest.RequestBuilder {
	return coretest.Request(name, "mig").Selector(fmt.Sprintf(`device.attributes["gpu.example.com"].profile == %q`, profile))
}
