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

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/pool"
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

// tablesOf builds one table per pool, to be paired with many fills.
func tablesOf(pools []*pool.Pool) []*PoolTable {
	out := make([]*PoolTable, len(pools))
	for i, p := range pools {
		out[i] = NewPoolTable(p, features.Set{})
	}
	return out
}

// newAlloc builds an Allocator over pools with the fill; with tables, it
// reuses them as a scheduler's state does across cycles.
func newAlloc(t testing.TB, pools []*pool.Pool, classes []*resourcev1.DeviceClass, fill []*resourcev1.ResourceClaim, tables []*PoolTable) *Allocator {
	t.Helper()
	if tables == nil {
		a, err := New(Input{Pools: pools, Classes: classes, Allocated: fill}, Options{NewShareID: stableShareID})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	return NewForSource(newStaticSource(tables, classes, fill), Options{NewShareID: stableShareID})
}

// cachedColumns counts the selector columns the tables hold.
func cachedColumns(tables []*PoolTable) int {
	n := 0
	for _, pt := range tables {
		for _, g := range pt.gens {
			g.cache.mu.Lock()
			n += len(g.cache.sel)
			g.cache.mu.Unlock()
		}
	}
	return n
}

// Tables hold nothing that depends on allocations, so one set of tables
// paired with ever other fills answers as fresh allocators do.
func TestTablesReusedAcrossFills(t *testing.T) {
	e := clusterEnv(2, 0)
	pools := pool.Assemble(e.slices)
	nodes := []*corev1.Node{at.Node("node-0"), at.Node("node-1")}
	fills := cacheFills()
	tables := tablesOf(pools)
	// Twice over, forwards and backwards, so that later allocators start
	// from results earlier ones left under other fills.
	order := make([]int, 0, 2*len(fills))
	for i := range fills {
		order = append(order, i)
	}
	for i := range fills {
		order = append(order, len(fills)-1-i)
	}
	for _, fi := range order {
		shared := newAlloc(t, pools, e.classes, fills[fi], tables)
		for ci, cl := range cacheClaims() {
			for _, n := range nodes {
				want := outcome(t, newAlloc(t, pools, e.classes, fills[fi], nil), n, cl)
				if got := outcome(t, shared, n, cl); got != want {
					t.Errorf("fill %d, claims %d, %s:\n got %s\nwant %s", fi, ci, n.Name, got, want)
				}
			}
		}
	}
	if cachedColumns(tables) == 0 {
		t.Error("the tables kept no selector results")
	}
}

// A long-running scheduler meets ever new expressions; a table keeps at
// most maxColumns of each kind.
func TestColumnsAreBounded(t *testing.T) {
	e := clusterEnv(1, 0)
	pt := NewPoolTable(pool.Assemble(e.slices)[0], features.Set{})
	g := pt.gens[0].static()
	e0 := &exprEntry{expr: "expr-0"}
	first := g.selColumn(e0)
	if g.selColumn(e0) != first {
		t.Fatal("the same expression got a second column")
	}
	for i := range 3 * maxColumns {
		g.selColumn(&exprEntry{expr: fmt.Sprintf("expr-%d", i)})
		g.attrColumn(fmt.Sprintf("attr-%d", i))
	}
	if n, m := len(g.cache.sel), len(g.cache.attrs); n > maxColumns || m > maxColumns {
		t.Errorf("%d selector and %d attribute columns kept, want at most %d", n, m, maxColumns)
	}
}

func TestTablesConcurrent(t *testing.T) {
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
	tables := tablesOf(pools)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 3*len(fills); i++ {
				fi := (g + i) % len(fills)
				a := newAlloc(t, pools, e.classes, fills[fi], tables)
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
// only the allocated claims change between cycles: an allocator plus
// Allocate, with the fill different on every call; "tables" keeps the
// pool tables across calls as pkg/core/state does.
func BenchmarkNewAllocateFill(b *testing.B) {
	for _, reuse := range []bool{false, true} {
		name := "fresh"
		if reuse {
			name = "tables"
		}
		b.Run(name, func(b *testing.B) {
			e := clusterEnv(1, 0)
			pools := pool.Assemble(e.slices)
			fills := cacheFills()[:8] // node-0 keeps a free GPU
			comp := defaultCompiler() // shared either way, like the scheduler's CEL cache
			cache := NewCache()
			var tables []*PoolTable
			if reuse {
				tables = tablesOf(pools)
			}
			node := at.Node("node-0")
			ctx := context.Background()
			cl := []*resourcev1.ResourceClaim{fourRequests()}
			run := func(i int) {
				fill := fills[i%len(fills)]
				var a *Allocator
				if reuse {
					a = NewForSource(newStaticSource(tables, e.classes, fill), Options{Compiler: comp, Cache: cache})
				} else {
					var err error
					if a, err = New(Input{Pools: pools, Classes: e.classes, Allocated: fill}, Options{Compiler: comp, Cache: cache}); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := a.Allocate(ctx, node, cl); err != nil {
					b.Fatal(err)
				}
			}
			for i := range fills {
				run(i) // warm the tables
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run(i)
			}
		})
	}
}
