package allocator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	at "github.com/dractl/dractl/pkg/allocator/allocatortest"
	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/pool"
)

// cacheFills are allocated-claim sets that differ only in Input.Allocated:
// whole GPUs and MIG devices of node-0 and node-1 in several mixes.
func cacheFills() [][]*resourcev1.ResourceClaim {
	var out [][]*resourcev1.ResourceClaim
	for k := 0; k <= 8; k++ {
		fill := []*resourcev1.ResourceClaim{fullGPUsAllocated("node-0", k)}
		if k%2 == 1 {
			fill = append(fill, at.Claim("mig-busy").Allocated(
				at.Result("r", gpuDriver, "node-1", "gpu-0-mig-1g.10gb-0"),
				at.Result("r", gpuDriver, "node-1", fmt.Sprintf("gpu-%d-mig-3g.40gb-0", k%8)),
			).Obj())
		}
		out = append(out, fill)
	}
	return out
}

func cacheClaims() [][]*resourcev1.ResourceClaim {
	return [][]*resourcev1.ResourceClaim{
		{fourRequests()},
		{at.Claim("c").Request(mig("r", "1g.10gb")).Obj()},
		{at.Claim("c").Request(mig("r", "3g.40gb").Count(2)).MatchAttribute("gpu.example.com/parentUUID").Obj()},
		{at.Claim("c").Request(at.Request("r", "gpu").Selector(`device.attributes["gpu.example.com"].type == "gpu"`).Count(3)).Obj()},
	}
}

func stableShareID() types.UID { return "share" }

// outcome renders what Allocate returned so that runs can be compared.
func outcome(t testing.TB, a *Allocator, node *corev1.Node, cl []*resourcev1.ResourceClaim) string {
	t.Helper()
	res, err := a.Allocate(context.Background(), node, cl)
	if err != nil {
		return "error: " + err.Error()
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newAlloc(t testing.TB, pools []*pool.Pool, classes []*resourcev1.DeviceClass, fill []*resourcev1.ResourceClaim, c *Cache) *Allocator {
	t.Helper()
	a, err := New(Input{Pools: pools, Classes: classes, Allocated: fill}, Options{Cache: c, NewShareID: stableShareID})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestCacheMatchesFreshAllocators(t *testing.T) {
	e := clusterEnv(2, 0)
	pools := pool.Assemble(e.slices)
	nodes := []*corev1.Node{at.Node("node-0"), at.Node("node-1")}
	fills := cacheFills()
	c := NewCache()
	// Twice over, forwards and backwards, so that later Allocators start
	// from results earlier ones left under other fills.
	order := make([]int, 0, 2*len(fills))
	for i := range fills {
		order = append(order, i)
	}
	for i := range fills {
		order = append(order, len(fills)-1-i)
	}
	for _, fi := range order {
		shared := newAlloc(t, pools, e.classes, fills[fi], c)
		for ci, cl := range cacheClaims() {
			for _, n := range nodes {
				want := outcome(t, newAlloc(t, pools, e.classes, fills[fi], nil), n, cl)
				if got := outcome(t, shared, n, cl); got != want {
					t.Errorf("fill %d, claims %d, %s:\n got %s\nwant %s", fi, ci, n.Name, got, want)
				}
			}
		}
	}
	if c.Len() == 0 {
		t.Error("nothing was cached")
	}
}

// hideGPU0Small copies s and sets the profile attribute of gpu-0's 1g.10gb
// devices to something no claim asks for.
func hideGPU0Small(s *api.ResourceSlice) *api.ResourceSlice {
	s = s.DeepCopy()
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		if len(d.Name) > len("gpu-0-mig-1g.10gb") && d.Name[:len("gpu-0-mig-1g.10gb")] == "gpu-0-mig-1g.10gb" {
			d.Attributes["profile"] = api.DeviceAttribute{StringValue: ptr.To("hidden")}
		}
	}
	return s
}

func TestCacheReevaluatesReplacedSlice(t *testing.T) {
	e := clusterEnv(1, 0)
	node := at.Node("node-0")
	cl := []*resourcev1.ResourceClaim{at.Claim("c").Request(mig("r", "1g.10gb")).MatchAttribute("gpu.example.com/profile").Obj()}
	c := NewCache()
	before := outcome(t, newAlloc(t, pool.Assemble(e.slices), e.classes, nil, c), node, cl)

	for _, tc := range []struct {
		name    string
		replace func(*api.ResourceSlice) *api.ResourceSlice
	}{
		{"new object", hideGPU0Small},
		{"same object, new resourceVersion", func(s *api.ResourceSlice) *api.ResourceSlice {
			// Against the contract, but a new resourceVersion must still
			// be a new key.
			s.Spec = hideGPU0Small(s).Spec
			s.ResourceVersion = "2"
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := clusterEnv(1, 0)
			c := NewCache()
			_ = outcome(t, newAlloc(t, pool.Assemble(e.slices), e.classes, nil, c), node, cl)
			for i, s := range e.slices {
				if len(s.Spec.Devices) > 0 {
					e.slices[i] = tc.replace(s)
				}
			}
			pools := pool.Assemble(e.slices)
			want := outcome(t, newAlloc(t, pools, e.classes, nil, nil), node, cl)
			if want == before {
				t.Fatalf("test does not change the outcome: %s", want)
			}
			if got := outcome(t, newAlloc(t, pools, e.classes, nil, c), node, cl); got != want {
				t.Errorf("after replacing the slice:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestCacheForgetAndBound(t *testing.T) {
	e := clusterEnv(2, 0)
	pools := pool.Assemble(e.slices)
	c := NewCache()
	cl := cacheClaims()[0]
	_ = outcome(t, newAlloc(t, pools, e.classes, nil, c), at.Node("node-0"), cl)
	_ = outcome(t, newAlloc(t, pools, e.classes, nil, c), at.Node("node-1"), cl)
	if n := c.Len(); n != 2 {
		t.Fatalf("Len = %d, want the 2 device slices", n)
	}
	c.Forget(e.slices[1]) // node-0's device slice
	if n := c.Len(); n != 1 {
		t.Fatalf("Len after Forget = %d, want 1", n)
	}
	// Allocators that only look at node-0 keep node-0's slice; node-1's
	// goes once CacheKeep of them have not used it.
	for i := 0; i < 2*CacheKeep; i++ {
		_ = outcome(t, newAlloc(t, pools, e.classes, nil, c), at.Node("node-0"), cl)
	}
	if n := c.Len(); n != 1 {
		t.Fatalf("Len after %d Allocators on node-0 = %d, want 1", 2*CacheKeep, n)
	}
	if _, ok := c.slices[keyOf(e.slices[1])]; !ok {
		t.Error("node-0's slice was dropped although in use")
	}
}

func TestCacheConcurrent(t *testing.T) {
	e := clusterEnv(2, 0)
	pools := pool.Assemble(e.slices)
	nodes := []*corev1.Node{at.Node("node-0"), at.Node("node-1")}
	fills := cacheFills()
	claimSets := cacheClaims()
	want := map[[3]int]string{}
	for fi := range fills {
		for ci := range claimSets {
			for ni, n := range nodes {
				want[[3]int{fi, ci, ni}] = outcome(t, newAlloc(t, pools, e.classes, fills[fi], nil), n, claimSets[ci])
			}
		}
	}
	c := NewCache()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 3*len(fills); i++ {
				fi := (g + i) % len(fills)
				a := newAlloc(t, pools, e.classes, fills[fi], c)
				for ci := range claimSets {
					ni := (g + ci) % len(nodes)
					if got := outcome(t, a, nodes[ni], claimSets[ci]); got != want[[3]int{fi, ci, ni}] {
						t.Errorf("goroutine %d, fill %d, claims %d, %s: got %s", g, fi, ci, nodes[ni].Name, got)
					}
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkNewAllocateFill is a scheduler's cycle on one 8×H100 node when
// only the allocated claims change between cycles: New plus Allocate, with
// the fill different on every call.
func BenchmarkNewAllocateFill(b *testing.B) {
	for _, withCache := range []bool{false, true} {
		name := "nocache"
		if withCache {
			name = "cache"
		}
		b.Run(name, func(b *testing.B) {
			e := clusterEnv(1, 0)
			pools := pool.Assemble(e.slices)
			fills := cacheFills()[:8] // node-0 keeps a free GPU
			comp := defaultCompiler() // shared either way, like the scheduler's CEL cache
			var c *Cache
			if withCache {
				c = NewCache()
			}
			node := at.Node("node-0")
			ctx := context.Background()
			cl := []*resourcev1.ResourceClaim{fourRequests()}
			run := func(i int) {
				a, err := New(Input{Pools: pools, Classes: e.classes, Allocated: fills[i%len(fills)]}, Options{Compiler: comp, Cache: c})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := a.Allocate(ctx, node, cl); err != nil {
					b.Fatal(err)
				}
			}
			for i := range fills {
				run(i) // warm the Cache
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run(i)
			}
		})
	}
}
