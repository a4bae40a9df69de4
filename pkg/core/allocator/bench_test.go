package allocator

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/pool"
)

// clusterEnv: nodes node-0..n-1 with 8 H100s each; on node-0 the first
// `full` GPUs are allocated.
func clusterEnv(nodes, full int) *env {
	var sl []*api.ResourceSlice
	for i := 0; i < nodes; i++ {
		sl = append(sl, gpuNode(fmt.Sprintf("node-%d", i), 8)...)
	}
	e := &env{slices: sl, classes: []*resourcev1.DeviceClass{gpuClass, migClass}}
	if full > 0 {
		e.allocated = claims(at.Claim("busy").Allocated(fullResults("node-0", full)...))
	}
	return e
}

func fullResults(node string, k int) []resourcev1.DeviceRequestAllocationResult {
	return fullGPUsAllocated(node, k).Status.Allocation.Devices.Results
}

func benchAllocate(b *testing.B, e *env, c *resourcev1.ResourceClaim) {
	a := e.alloc(b)
	n := at.Node("node-0")
	ctx := context.Background()
	cl := []*resourcev1.ResourceClaim{c}
	if _, err := a.Allocate(ctx, n, cl); err != nil { // warm the caches
		b.Fatal(err)
	}
	// Settle the garbage of building a large cluster so it is not billed
	// to the per-node cost.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := a.Allocate(ctx, n, cl); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOne1g(b *testing.B) {
	for _, pct := range []struct {
		name string
		full int
	}{{"0pct", 0}, {"50pct", 4}, {"90pct", 7}} {
		b.Run(pct.name, func(b *testing.B) {
			benchAllocate(b, clusterEnv(1, pct.full), at.Claim("c").Request(mig("r", "1g.10gb")).Obj())
		})
	}
}

// BenchmarkOne1gBestFit is BenchmarkOne1g with BestFit scoring every
// candidate placement.
func BenchmarkOne1gBestFit(b *testing.B) {
	e := clusterEnv(1, 4)
	e.opts.Strategy = BestFit
	benchAllocate(b, e, at.Claim("c").Request(mig("r", "1g.10gb")).Obj())
}

func fourRequests() *resourcev1.ResourceClaim {
	return at.Claim("c").Request(mig("a", "1g.10gb")).Request(mig("b", "1g.10gb")).Request(mig("c", "2g.20gb")).Request(mig("d", "3g.40gb")).
		MatchAttribute("gpu.example.com/parentUUID").Obj()
}

func BenchmarkFourRequestsMatch(b *testing.B) {
	for _, pct := range []struct {
		name string
		full int
	}{{"0pct", 0}, {"50pct", 4}, {"90pct", 7}} {
		b.Run(pct.name, func(b *testing.B) { benchAllocate(b, clusterEnv(1, pct.full), fourRequests()) })
	}
}

func BenchmarkCountSeven(b *testing.B) {
	e := countSevenEnv()
	for i := range e.slices {
		e.slices[i] = renameNode(e.slices[i], "node-1", "node-0")
	}
	var rs []resourcev1.DeviceRequestAllocationResult
	for g := 0; g < 7; g++ {
		rs = append(rs, at.Result("r", gpuDriver, "node-0", at.Name("gpu", g)+"-mig-1g.10gb-6"))
	}
	e.allocated = claims(at.Claim("busy").Allocated(rs...))
	benchAllocate(b, e, at.Claim("c").Request(mig("r", "1g.10gb").Count(7)).MatchAttribute("gpu.example.com/parentUUID").Obj())
}

func renameNode(s *api.ResourceSlice, from, to string) *api.ResourceSlice {
	if s.Spec.NodeName != nil && *s.Spec.NodeName == from {
		s.Spec.NodeName = &to
	}
	if s.Spec.Pool.Name == from {
		s.Spec.Pool.Name = to
	}
	return s
}

func BenchmarkNodes(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			benchAllocate(b, clusterEnv(n, 4), fourRequests())
		})
	}
}

// BenchmarkNodesRoundRobin visits every node once before timing, then
// cycles through all of them: per-node cost once each node's pools have
// their tables. It must not grow with the number of nodes.
func BenchmarkNodesRoundRobin(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			e := clusterEnv(n, 0)
			a := e.alloc(b)
			nodes := make([]*corev1.Node, n)
			for i := range nodes {
				nodes[i] = at.Node(fmt.Sprintf("node-%d", i))
			}
			ctx := context.Background()
			cl := []*resourcev1.ResourceClaim{fourRequests()}
			for _, node := range nodes {
				if _, err := a.Allocate(ctx, node, cl); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := a.Allocate(ctx, nodes[i%n], cl); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkColdOneNode is what a scheduler pays when it rebuilds state per
// cycle: pool.Assemble and New over the whole cluster, then Allocate for
// one node. Only the node's pools may cost more than a few pointer writes.
func BenchmarkColdOneNode(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			e := clusterEnv(n, 0)
			comp := defaultCompiler() // shared, like the scheduler's CEL cache
			node := at.Node("node-0")
			ctx := context.Background()
			cl := []*resourcev1.ResourceClaim{fourRequests()}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a, err := New(Input{Pools: pool.Assemble(e.slices), Classes: e.classes}, Options{Compiler: comp})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := a.Allocate(ctx, node, cl); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
