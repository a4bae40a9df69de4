package allocator

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/allocator/allocatortest"
	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/pool"
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
	gpuClass = allocatortest.Class("gpu", `device.driver == "gpu.example.com"`)
	migClass = allocatortest.Class("mig", `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "mig"`)
	anyClass = allocatortest.Class("any")
)

// migProfile is one MIG placement: memory slices [start, start+mem) and
// engine counts.
type migProfile struct {
	name       string
	placements []int
	mem, mp    int
	ce, dec    int
}

var h100 = []migProfile{
	{"1g.10gb", []int{0, 1, 2, 3, 4, 5, 6}, 1, 14, 1, 0},
	{"1g.20gb", []int{0, 2, 4, 6}, 2, 14, 1, 1},
	{"2g.20gb", []int{0, 2, 4}, 2, 28, 2, 1},
	{"3g.40gb", []int{0, 4}, 4, 42, 3, 2},
	{"4g.40gb", []int{0}, 4, 56, 4, 2},
	{"7g.80gb", []int{0}, 8, 98, 7, 7},
}

// gpuNode adds the slices of one node with n H100s, each its own counter
// set with the whole GPU and its 18 MIG placements as devices (KEP-4815's
// MIG example).
func gpuNode(node string, n int) []*api.ResourceSlice {
	cs := allocatortest.Slice(node + "-counters").Driver(gpuDriver).Pool(node).Count(2).Node(node)
	ds := allocatortest.Slice(node + "-devices").Driver(gpuDriver).Pool(node).Count(2).Node(node)
	for g := 0; g < n; g++ {
		set := fmt.Sprintf("gpu-%d-counters", g)
		kv := []string{"multiprocessors", "98", "copy-engines", "7", "decoders", "7"}
		for m := 0; m < 8; m++ {
			kv = append(kv, fmt.Sprintf("memory-slice-%d", m), "1")
		}
		cs.Counters(set, kv...)
		parent := fmt.Sprintf("%s-gpu-%d", node, g)
		full := []string{"multiprocessors", "98", "copy-engines", "7", "decoders", "7"}
		for m := 0; m < 8; m++ {
			full = append(full, fmt.Sprintf("memory-slice-%d", m), "1")
		}
		ds.Device(allocatortest.Device(fmt.Sprintf("gpu-%d", g)).Str("type", "gpu").Str("parentUUID", parent).
			Str("profile", "full").Consumes(set, full...))
		for _, p := range h100 {
			for _, start := range p.placements {
				kv := []string{"multiprocessors", fmt.Sprint(p.mp), "copy-engines", fmt.Sprint(p.ce)}
				if p.dec > 0 {
					kv = append(kv, "decoders", fmt.Sprint(p.dec))
				}
				for m := start; m < start+p.mem; m++ {
					kv = append(kv, fmt.Sprintf("memory-slice-%d", m), "1")
				}
				ds.Device(allocatortest.Device(fmt.Sprintf("gpu-%d-mig-%s-%d", g, p.name, start)).Str("type", "mig").
					Str("parentUUID", parent).Str("profile", p.name).Int("placement", int64(start)).Consumes(set, kv...))
			}
		}
	}
	return []*api.ResourceSlice{cs.Obj(), ds.Obj()}
}

// fullGPUsAllocated marks the first k whole GPUs of a node as allocated.
func fullGPUsAllocated(node string, k int) *resourcev1.ResourceClaim {
	var rs []resourcev1.DeviceRequestAllocationResult
	for g := 0; g < k; g++ {
		rs = append(rs, allocatortest.Result("r", gpuDriver, node, fmt.Sprintf("gpu-%d", g)))
	}
	return allocatortest.Claim("busy-" + node).Allocated(rs...).Obj()
}

func mig(name, profile string) *allocatortest.RequestBuilder {
	return allocatortest.Request(name, "mig").Selector(fmt.Sprintf(`device.attributes["gpu.example.com"].profile == %q`, profile))
}
