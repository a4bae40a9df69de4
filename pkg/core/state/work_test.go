package state_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
)

// cluster is a State with n nodes, each with KEP-4815's partitioned GPU
// in its own pool, and one pending claim per node.
func cluster(t testing.TB, n int) *state.State {
	t.Helper()
	st := state.New(options())
	at.Must(t, st.SetClass(at.Class("gpu", `device.driver == "`+driver+`"`)))
	for i := range n {
		node := at.Name("node", i)
		at.Must(t, st.SetMixinSlice(at.Slice(node+"-counters").Driver(driver).Pool(node).Node(node).Count(2).
			Counters("gpu-0", "memory", "40Gi").Obj()))
		devs := []*at.DeviceBuilder{at.Device("gpu-0").Consumes("gpu-0", "memory", "40Gi")}
		for j := range 4 {
			devs = append(devs, at.Device(at.Name("part", j)).Consumes("gpu-0", "memory", "10Gi"))
		}
		at.Must(t, st.SetMixinSlice(at.Slice(node+"-devices").Driver(driver).Pool(node).Node(node).Count(2).Device(devs...).Obj()))
	}
	return st
}

func allocatedOn(name, node string, devices ...string) *resourcev1.ResourceClaim {
	var rs []resourcev1.DeviceRequestAllocationResult
	for _, d := range devices {
		rs = append(rs, at.Result("gpu", driver, node, d))
	}
	return at.Claim(name).Request(at.Request("gpu", "gpu")).Allocated(rs...).Obj()
}

// A delta rebuilds only what it touches: a slice update its own pool, a
// claim allocation the overlay of the pool it names and no table.
func TestDeltasTouchOnlyTheirPool(t *testing.T) {
	st := cluster(t, 200)
	before := st.Stats()
	at.Must(t, st.SetClaim(allocatedOn("a", "node-7", "part-0")))
	after := st.Stats()
	if d := after.PoolBuilds - before.PoolBuilds; d != 0 {
		t.Errorf("a claim allocation rebuilt %d pools, want 0", d)
	}
	if d := after.HeldUpdates - before.HeldUpdates; d != 1 {
		t.Errorf("a claim allocation on one pool updated %d overlays, want 1", d)
	}
	at.Must(t, st.SetClaim(pending("b")))
	if d := st.Stats().HeldUpdates - after.HeldUpdates; d != 0 {
		t.Errorf("a pending claim updated %d overlays, want 0", d)
	}
	before = st.Stats()
	at.Must(t, st.SetMixinSlice(at.Slice("node-9-devices").Driver(driver).Pool("node-9").Node("node-9").Count(2).
		Device(at.Device("gpu-0").Consumes("gpu-0", "memory", "40Gi")).Obj()))
	if d := st.Stats().PoolBuilds - before.PoolBuilds; d != 1 {
		t.Errorf("a slice update rebuilt %d pools, want 1", d)
	}
	// The moved-in pool sees the new device list, the others are as before.
	u := st.Snapshot().Usage(poolID("node-9"))
	if len(u.Devices) != 1 {
		t.Errorf("node-9 has %d devices after the update, want 1", len(u.Devices))
	}
}

// What a scheduling cycle allocates (applying the last cycle's claim,
// taking a snapshot, preparing the claims, allocating on one node) does
// not grow with the number of nodes, but for the depth of the State's
// copy-on-write maps: a write copies one node more per 16 times more
// entries, in the two maps a claim delta writes (claims, pools).
func TestCycleWorkDoesNotGrowWithCluster(t *testing.T) {
	allocs := map[int]float64{}
	for _, n := range []int{10, 1000} {
		st := cluster(t, n)
		node := at.Node("node-3")
		claims := []*resourcev1.ResourceClaim{pending("p")}
		// Warm: the node's table is built once, as it stays.
		_, err := st.Snapshot().Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), node)
		at.Must(t, err)
		i := 0
		allocs[n] = leastAllocs(func() {
			i++
			c := allocatedOn("churn", "node-3", "part-3")
			if i%2 == 0 {
				c = pending("churn")
			}
			at.Must(t, st.SetClaim(c))
			if _, err := st.Snapshot().Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), node); err != nil {
				t.Fatal(err)
			}
		})
	}
	if allocs[1000] > allocs[10]+2 {
		t.Errorf("a cycle allocates %.0f objects on 1000 nodes, %.0f on 10: it must not depend on the cluster", allocs[1000], allocs[10])
	}
}

// What a claim delta and a snapshot allocate does not grow with the number
// of nodes, but for the depth of the pools map's trie: a write copies the
// nodes on its path, one inner node more per 16 times more pools. The
// bucket a pool shares with others differs by chance, by up to one
// bucket's size.
func TestDeltaBytesDoNotGrowWithCluster(t *testing.T) {
	const innerNode, bucket = 176, 480 // size classes of a 16-way inner node and a full bucket
	bytes := map[int]float64{}
	for _, n := range []int{100, 1000} {
		st := cluster(t, n)
		c, released := allocatedOn("churn", "node-3", "part-3"), pending("churn")
		at.Must(t, st.SetClaim(released))
		i := 0
		bytes[n] = leastBytes(func() {
			i++
			x := c
			if i%2 == 0 {
				x = released
			}
			at.Must(t, st.SetClaim(x))
			st.Snapshot()
		})
	}
	if bytes[1000] > bytes[100]+innerNode+bucket {
		t.Errorf("a delta allocates %.0f bytes on 1000 nodes, %.0f on 100: more than one trie level and one bucket apart", bytes[1000], bytes[100])
	}
}

// Filter reaches the node's pools through the node index and the pools'
// slots, reading no map keyed by pool: on a cluster of many nodes a Filter
// finds the node's data out of the CPU caches, and each map level costs a
// miss. A snapshot whose pools map is emptied still allocates on the node.
func TestFilterReadsNoPoolsMap(t *testing.T) {
	st := cluster(t, 100)
	at.Must(t, st.SetClaim(allocatedOn("a", "node-3", "part-0")))
	snap := st.Snapshot()
	claims := []*resourcev1.ResourceClaim{pending("p")}
	want := outcomeOf(snap.Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), at.Node("node-3")))
	state.DropPoolsMap(snap)
	got := outcomeOf(snap.Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), at.Node("node-3")))
	if got != want || !strings.Contains(got, `"device":"part-1"`) {
		t.Errorf("without the pools map, Filter on node-3 gives %s, want %s (part-1)", got, want)
	}
}

// A snapshot keeps the pools it was taken with, however often deltas
// change them afterwards: its Filter reads the pool's slot while the pool
// changed at most once since, and its own pools map after that.
func TestOldSnapshotsKeepTheirPools(t *testing.T) {
	st := cluster(t, 20)
	claims := []*resourcev1.ResourceClaim{pending("p")}
	filter := func(s *state.Snapshot) string {
		return outcomeOf(s.Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), at.Node("node-3")))
	}
	var snaps []*state.Snapshot
	var want []string
	for i := range 8 {
		snaps = append(snaps, st.Snapshot())
		want = append(want, filter(snaps[i]))
		// Partitions taken one by one, then given back.
		c := allocatedOn(fmt.Sprint("c-", i%4), "node-3", at.Name("part", i%4))
		if i >= 4 {
			c = pending(fmt.Sprint("c-", i%4))
		}
		at.Must(t, st.SetClaim(c))
	}
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(want)))); distinct < 4 {
		t.Fatalf("the deltas changed node-3's answer %d times, want at least 4 different answers", distinct)
	}
	for _, i := range []int{7, 0, 5, 2, 6, 1, 4, 3} {
		if got := filter(snaps[i]); got != want[i] {
			t.Errorf("snapshot %d: Filter on node-3 gives %s after later deltas, want %s", i, got, want[i])
		}
	}
}

// Filter runs on many goroutines against one snapshot while deltas keep
// arriving; every answer is the one the snapshot gives alone.
func TestParallelFilterWhileDeltasArrive(t *testing.T) {
	st := cluster(t, 32)
	snap := st.Snapshot()
	claims := []*resourcev1.ResourceClaim{pending("p")}
	cyc := snap.Cycle(claims, state.CycleOptions{})
	nodes := make([]*corev1.Node, 32)
	want := make([]string, 32)
	for i := range nodes {
		nodes[i] = at.Node(at.Name("node", i))
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			node := at.Name("node", i%32)
			c := allocatedOn(fmt.Sprint("churn-", i%32), node, at.Name("part", i%4))
			if (i/32)%2 == 1 {
				c = pending(fmt.Sprint("churn-", i%32))
			}
			if err := st.SetClaim(c); err != nil {
				t.Error(err)
			}
			if i%3 == 0 {
				if err := st.SetMixinSlice(at.Slice(node+"-counters").Driver(driver).Pool(node).Node(node).Count(2).
					Counters("gpu-0", "memory", "20Gi").Obj()); err != nil {
					t.Error(err)
				}
			}
			st.Snapshot()
		}
	})
	for g := range 16 {
		wg.Go(func() {
			for i := range 64 {
				n := (g + i) % 32
				got := outcomeOf(cyc.Allocate(context.Background(), nodes[n]))
				if i < 32 && g == 0 {
					want[n] = got
				}
				if got != outcomeOf(snap.Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), nodes[n])) {
					t.Errorf("goroutine %d, %s: answer changed while deltas arrived", g, nodes[n].Name)
				}
			}
		})
	}
	wg.Wait()
	for i, w := range want {
		if w != "" && w != outcomeOf(snap.Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), nodes[i])) {
			t.Errorf("%s: the snapshot changed", nodes[i].Name)
		}
	}
}

// A v1 slice from an informer is read in place: its maps are shared, not
// copied.
func TestV1SliceIsNotCopied(t *testing.T) {
	v1 := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1},
			NodeName: ptrTo("node-1"), Devices: []resourcev1.Device{{Name: "d",
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"kind": {StringValue: ptrTo("gpu")}},
				Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("1Gi")}}}}},
	}
	st := state.New(options())
	at.Must(t, st.SetSlice(v1))
	got := st.Snapshot().Slices()[0].Spec.Devices[0]
	if reflect.ValueOf(got.Attributes).Pointer() != reflect.ValueOf(v1.Spec.Devices[0].Attributes).Pointer() ||
		reflect.ValueOf(got.Capacity).Pointer() != reflect.ValueOf(v1.Spec.Devices[0].Capacity).Pointer() {
		t.Error("the state copied the informer object's maps")
	}
}

func ptrTo[T any](v T) *T { return &v }

func poolID(name string) pool.ID { return pool.ID{Driver: driver, Pool: name} }

// Filter on a node that sees only its own pool, for one claim of one
// request, allocates one block whatever the cluster: the results with
// their node selector. The search's lists (pools, request, alternative,
// picks) and arrays come from a pool; what the node sees of its pool is
// decided once per pool table, not per Filter.
func TestFilterAllocatesAFewBlocks(t *testing.T) {
	st := cluster(t, 100)
	claims := []*resourcev1.ResourceClaim{pending("p")}
	cyc := st.Snapshot().Cycle(claims, state.CycleOptions{})
	node := at.Node("node-3")
	_, err := cyc.Allocate(context.Background(), node)
	at.Must(t, err)
	n := leastAllocs(func() {
		if _, err := cyc.Allocate(context.Background(), node); err != nil {
			t.Fatal(err)
		}
	})
	limit := 1.0
	if raceEnabled {
		limit += 2 // the pooled scratch space, reallocated when the pool drops it
	}
	if n > limit {
		t.Errorf("Filter on a warm node allocates %.0f objects, want at most %.0f", n, limit)
	}
}

// leastBytes is the least of five counts of the bytes f allocates per
// call, over 50 calls, for the reason leastAllocs gives.
func leastBytes(f func()) float64 {
	n := math.Inf(1)
	for range 5 {
		var m0, m1 runtime.MemStats
		f()
		runtime.ReadMemStats(&m0)
		for range 50 {
			f()
		}
		runtime.ReadMemStats(&m1)
		n = min(n, float64(m1.TotalAlloc-m0.TotalAlloc)/50)
	}
	return n
}

// leastAllocs is the least of five testing.AllocsPerRun(50, f) counts:
// under the race detector sync.Pool drops the search's pooled scratch at
// random, which only ever adds allocations, so one average varies by a
// few objects from run to run; without it every count is the same.
func leastAllocs(f func()) float64 {
	n := math.Inf(1)
	for range 5 {
		n = min(n, testing.AllocsPerRun(50, f))
	}
	return n
}
