package informer_test

import (
	"fmt"
	"runtime"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/internal/testing/clusterbench"
	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/core/state/informer"
)

func poolSlice(name, node string, gen, count int64, devices int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: ptr.To(node),
		Pool: resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: count},
	}}
	for i := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("%s-gpu-%d", name, i)})
	}
	return s
}

// TestThousandPoolsChangingEverySecond feeds the State what 1,000 nodes
// republishing every second for a minute send: every slice replaced each
// round, its devices changing, and a tenth of the pools going back a
// generation every other round. Each round the State holds exactly the
// last update of every pool, its current generation and devices, with no
// slice of an earlier round left behind and nothing refused.
func TestThousandPoolsChangingEverySecond(t *testing.T) {
	const pools, rounds = 1000, 60
	st := state.New(state.Options{})
	logger, lines := logLines()
	h := informer.Slices(st).Handler(logger)
	cur := make([]*resourcev1.ResourceSlice, pools)
	for i := range cur {
		cur[i] = poolSlice(fmt.Sprintf("s-%d", i), fmt.Sprintf("node-%d", i), 100, 1, 4)
		h.OnAdd(cur[i], false)
	}
	for r := range rounds {
		for i, old := range cur {
			gen := old.Spec.Pool.Generation + 1
			if i%10 == 0 && r%2 == 1 {
				gen = old.Spec.Pool.Generation - 2
			}
			next := poolSlice(old.Name, *old.Spec.NodeName, gen, 1, 1+(r+i)%4)
			h.OnUpdate(old, next)
			cur[i] = next
		}
		snap := st.Snapshot()
		if got := len(snap.Pools()); got != pools {
			t.Fatalf("round %d: %d pools, want %d", r, got, pools)
		}
		for _, i := range []int{0, 1, 10, 999} {
			want := cur[i]
			p, ok := snap.Pool(pool.ID{Driver: "gpu.example.com", Pool: *want.Spec.NodeName})
			if !ok {
				t.Fatalf("round %d: pool %s missing", r, *want.Spec.NodeName)
			}
			if p.Generation != want.Spec.Pool.Generation || len(p.Slices) != 1 || len(p.Older) != 0 ||
				len(p.Slices[0].Spec.Devices) != len(want.Spec.Devices) {
				t.Fatalf("round %d: pool %s at generation %d with %d slices (%d older), want generation %d, one slice of %d devices",
					r, p.ID, p.Generation, len(p.Slices), len(p.Older), want.Spec.Pool.Generation, len(want.Spec.Devices))
			}
			if c, why := snap.Usage(p.ID).Condition(); c != state.PoolOK {
				t.Fatalf("round %d: pool %s %s: %s", r, p.ID, c, why)
			}
		}
	}
	if len(*lines) != 0 {
		t.Errorf("refusals logged: %q", *lines)
	}
}

// TestGenerationGoingBackwards: a pool whose slices move back to an older
// generation is read as the KEP says, from the slices of the highest
// generation present now, not the highest ever seen: while one of two
// slices went back the pool is incomplete, once both have it is whole at
// the older generation and its devices count.
func TestGenerationGoingBackwards(t *testing.T) {
	st := state.New(state.Options{})
	logger, lines := logLines()
	h := informer.Slices(st).Handler(logger)
	a, b := poolSlice("a", "node-1", 5, 2, 2), poolSlice("b", "node-1", 5, 2, 2)
	h.OnAdd(a, false)
	h.OnAdd(b, false)
	id := pool.ID{Driver: "gpu.example.com", Pool: "node-1"}

	a3 := poolSlice("a", "node-1", 3, 2, 2)
	h.OnUpdate(a, a3)
	snap := st.Snapshot()
	if c, _ := snap.Usage(id).Condition(); c != state.PoolIncomplete {
		t.Errorf("one slice back: pool %s, want incomplete", c)
	}
	b3 := poolSlice("b", "node-1", 3, 2, 2)
	h.OnUpdate(b, b3)
	snap = st.Snapshot()
	p, _ := snap.Pool(id)
	if c, why := snap.Usage(id).Condition(); c != state.PoolOK || p.Generation != 3 || len(p.Slices) != 2 || len(snap.Usage(id).Devices) != 4 {
		t.Errorf("both back: pool %s (%s) at generation %d with %d slices and %d devices, want ok at 3 with 2 and 4",
			c, why, p.Generation, len(p.Slices), len(snap.Usage(id).Devices))
	}
	if len(*lines) != 0 {
		t.Errorf("refusals logged: %q", *lines)
	}
}

// TestLargestSlicesCostLittleBeyondThemselves: the largest plain slices v1
// allows (128 devices, 32 string attributes each at the longest value)
// cost the State less than a tenth of the objects themselves. The
// scheduler's informer holds each object anyway; the State reads it in
// place and adds its indexes, so a hostile driver grows dractl-scheduler
// by a small part of what it makes kube-scheduler hold, never by a
// multiple.
func TestLargestSlicesCostLittleBeyondThemselves(t *testing.T) {
	const n = 20
	objects := make([]*resourcev1.ResourceSlice, n)
	perObject := float64(clusterbench.LiveHeap(func() any {
		for i := range objects {
			// A fresh worst case each: objects decoded from the wire share
			// no strings with each other.
			o, err := api.ToUpstream(testgen.WorstCaseFlat(testgen.StringAttributes)["devices"])
			if err != nil {
				t.Fatal(err)
			}
			o.Name = fmt.Sprintf("largest-%d", i)
			o.Spec.NodeName = ptr.To(fmt.Sprintf("node-%d", i))
			o.Spec.Pool = resourcev1.ResourcePool{Name: fmt.Sprintf("node-%d", i), Generation: 1, ResourceSliceCount: 1}
			objects[i] = o
		}
		return nil
	})) / n

	logger, lines := logLines()
	var snap *state.Snapshot
	perSlice := float64(clusterbench.LiveHeap(func() any {
		st := state.New(state.Options{})
		h := informer.Slices(st).Handler(logger)
		for _, o := range objects {
			h.OnAdd(o, false)
		}
		snap = st.Snapshot()
		return st
	})) / n
	t.Logf("a slice at v1's limits: %.0f KiB as an object, %.0f KiB more in the State", perObject/1024, perSlice/1024)
	if perSlice > perObject/10 {
		t.Errorf("the State adds %.0f KiB per slice, more than a tenth of the object's %.0f KiB: it copies what it could read in place", perSlice/1024, perObject/1024)
	}
	if len(*lines) != 0 {
		t.Errorf("refusals logged: %q", *lines)
	}
	devices := 0
	for _, p := range snap.Pools() {
		for _, s := range p.Slices {
			devices += len(s.Spec.Devices)
		}
	}
	if len(snap.Pools()) != n || devices != n*len(objects[0].Spec.Devices) {
		t.Errorf("%d pools with %d devices, want %d with %d", len(snap.Pools()), devices, n, n*len(objects[0].Spec.Devices))
	}
	runtime.KeepAlive(objects)
}
