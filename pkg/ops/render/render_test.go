package render_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/render"
)

var update = flag.Bool("update", false, "rewrite testdata/ from the current output")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/ops/render -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Errorf("output differs from %s at line %d (rerun with -update and review the diff):\n- %s\n+ %s", path, i+1, w[i], g[i])
				return
			}
		}
		t.Errorf("output differs from %s in length (rerun with -update and review the diff)", path)
	}
}

// example loads examples/<dir> into a State, without its claims, and
// allocates one claim per request expression on node, in order, first-fit,
// through snapshots and cycles as a scheduler would.
func example(t *testing.T, dir, node string, exprs ...string) *state.Snapshot {
	t.Helper()
	objs, err := decode.Paths([]string{filepath.Join("..", "..", "..", "examples", dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := decode.Group(objs)
	st := state.New(state.Options{})
	for _, s := range set.Slices {
		coretest.Must(t, st.SetMixinSlice(s))
	}
	for _, c := range set.Classes {
		coretest.Must(t, st.SetClass(c))
	}
	class := set.Classes[len(set.Classes)-1].Name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"kubernetes.io/hostname": node}}}
	for i, expr := range exprs {
		c := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: "default"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "r",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}},
			}}}},
		}
		res, err := st.Snapshot().Cycle([]*resourcev1.ResourceClaim{c}, state.CycleOptions{}).Allocate(context.Background(), n)
		coretest.Must(t, err)
		c.Status.Allocation = res[0]
		coretest.Must(t, st.SetClaim(c))
	}
	return st.Snapshot()
}

func profile(p string) string { return "device.attributes['gpu.nvidia.com'].profile == '" + p + "'" }

func TestPictures(t *testing.T) {
	cases := []struct {
		name string
		snap func(t *testing.T) *state.Snapshot
		pool pool.ID
	}{
		{"a100-kep", func(t *testing.T) *state.Snapshot {
			// KEP-4815's claim: two 1g.5gb, a 2g.10gb and a 3g.20gb on one GPU.
			return example(t, "a100-mig-flat", "a100-node", profile("1g.5gb"), profile("1g.5gb"), profile("2g.10gb"), profile("3g.20gb"))
		}, pool.ID{Driver: "gpu.nvidia.com", Pool: "a100-node"}},
		{"dgx-h100-mixed", func(t *testing.T) *state.Snapshot {
			return example(t, "dgx-h100-mixins", "dgx-h100-node", profile("7g.80gb"), profile("3g.40gb"), profile("1g.10gb"), profile("1g.20gb"), profile("2g.20gb"), "device.attributes['gpu.nvidia.com'].type == 'mig'")
		}, pool.ID{Driver: "gpu.nvidia.com", Pool: "dgx-h100-node"}},
		{"gpu-partitions", func(t *testing.T) *state.Snapshot {
			return example(t, "gpu-partitions", "my-node", "device.capacity['resource-driver.example.com'].memory.compareTo(quantity('10Gi')) == 0")
		}, pool.ID{Driver: "resource-driver.example.com", Pool: "my-node"}},
		{"tpu-2x4", func(t *testing.T) *state.Snapshot {
			return example(t, "tpu-multihost", "node-1", "device.attributes['tpu.google.com'].topology == '2x4'")
		}, pool.ID{Driver: "tpu.google.com", Pool: "tpu-pool"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.snap(t).Usage(tc.pool)
			if u == nil {
				t.Fatalf("no pool %s", tc.pool)
			}
			var text, svg bytes.Buffer
			coretest.Must(t, render.PoolText(&text, u, render.Options{}))
			golden(t, tc.name+".txt", text.Bytes())
			coretest.Must(t, render.PoolSVG(&svg, u, render.Options{}))
			golden(t, tc.name+".svg", svg.Bytes())
			if strings.Contains(text.String(), "\x1b") {
				t.Error("plain text has escape sequences")
			}
		})
	}
}

// TestKEPDiagram checks the layout of KEP-4815's example claim cell by
// cell: the partitions it holds, the ones it blocks, the ones left free.
func TestKEPDiagram(t *testing.T) {
	snap := example(t, "a100-mig-flat", "a100-node", profile("1g.5gb"), profile("1g.5gb"), profile("2g.10gb"), profile("3g.20gb"))
	g := render.Grids(snap.Usage(pool.ID{Driver: "gpu.nvidia.com", Pool: "a100-node"}))[0]
	if g.Set != "gpu-0-counter-set" || g.Corner != "memory-slice" || strings.Join(g.Columns, "") != "01234567" {
		t.Fatalf("set %s, columns %s %v; want gpu-0-counter-set, memory-slice 0..7", g.Set, g.Corner, g.Columns)
	}
	var labels []string
	cells := map[string]render.Cell{}
	for _, r := range g.Rows {
		labels = append(labels, r.Label)
		for _, c := range r.Cells {
			cells[c.Device] = c
		}
	}
	if got, want := strings.Join(labels, " "), "gpu-0 7g.40gb 4g.20gb 3g.20gb 2g.10gb 1g.10gb 1g.5gb+me 1g.5gb"; got != want {
		t.Errorf("rows %q, want %q", got, want)
	}
	for dev, want := range map[string]struct {
		start, span int
		state       render.CellState
		holder      string
	}{
		"gpu-0":                 {0, 8, render.Blocked, ""},
		"gpu-0-mig-3g-20gb-4":   {4, 4, render.Held, "c3"},
		"gpu-0-mig-3g-20gb-0":   {0, 4, render.Blocked, ""},
		"gpu-0-mig-2g-10gb-2":   {2, 2, render.Held, "c2"},
		"gpu-0-mig-1g-5gb-0":    {0, 1, render.Held, "c0"},
		"gpu-0-mig-1g-5gb-1":    {1, 1, render.Held, "c1"},
		"gpu-0-mig-1g-5gb-6":    {6, 1, render.Blocked, ""},
		"gpu-0-mig-1g-5gb-me-2": {2, 1, render.Blocked, ""},
	} {
		c, ok := cells[dev]
		if !ok {
			t.Errorf("%s: not drawn", dev)
			continue
		}
		holder := ""
		if len(c.Holders) > 0 {
			holder = c.Holders[0].Claim.Name
		}
		if c.Start != want.start || c.Span != want.span || c.State != want.state || holder != want.holder {
			t.Errorf("%s: columns %d+%d state %d holder %q, want %d+%d state %d holder %q", dev, c.Start, c.Span, c.State, holder, want.start, want.span, want.state, want.holder)
		}
	}
	var b bytes.Buffer
	coretest.Must(t, render.Text(&b, g, render.Options{Color: true}))
	if !strings.Contains(b.String(), "\x1b[30;48;5;") || !strings.Contains(b.String(), "\x1b[2m") {
		t.Error("colour output lacks held (claim colour) or blocked (dim) cells")
	}
}

// TestEveryDeviceDrawn: in every example pool, each device that consumes
// a counter set appears in that set's grid exactly once per contiguous run
// of columns, and no two cells of a row overlap.
func TestEveryDeviceDrawn(t *testing.T) {
	for _, ex := range []struct{ dir, node string }{
		{"a100-mig-mixins", "a100-node"}, {"dgx-h100-mixins", "dgx-h100-node"}, {"gpu-partitions", "my-node"}, {"tpu-multihost", "node-1"},
	} {
		snap := example(t, ex.dir, ex.node)
		for _, p := range snap.Pools() {
			u := snap.Usage(p.ID)
			want := map[string]int{}
			for _, d := range u.Devices {
				for _, cv := range d.View.Consumptions {
					want[cv.CounterSet()+"/"+d.Device.Name] = 1
				}
			}
			got := map[string]int{}
			for _, g := range render.Grids(u) {
				seen := map[string]bool{}
				for _, r := range g.Rows {
					used := make([]bool, len(g.Columns))
					for _, c := range r.Cells {
						for i := c.Start; i < c.Start+c.Span; i++ {
							if used[i] {
								t.Errorf("%s %s: %s overlaps another cell of row %s", ex.dir, g.Set, c.Device, r.Label)
							}
							used[i] = true
						}
						seen[c.Device] = true
					}
				}
				for _, c := range g.Other {
					seen[c.Device] = true
				}
				for d := range seen {
					got[g.Set+"/"+d]++
				}
			}
			for k := range want {
				if got[k] != 1 {
					t.Errorf("%s: %s drawn %d times, want once", ex.dir, k, got[k])
				}
			}
			if len(got) != len(want) {
				t.Errorf("%s: %d devices drawn, %d consume counters", ex.dir, len(got), len(want))
			}
		}
	}
}
