package reshape

import (
	"encoding/json"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
)

// poolContent is what a pool means once flattened: its devices and counter
// sets by name and what its slices share.
type poolContent struct {
	shell   *api.ResourceSlice
	devices map[string]api.Device
	sets    map[string]api.CounterSet
}

func contentOf(t *testing.T, name string, pool []*api.ResourceSlice) poolContent {
	t.Helper()
	c := poolContent{devices: map[string]api.Device{}, sets: map[string]api.CounterSet{}}
	for _, s := range pool {
		// The oracle is testgen's eager flattener, as in checkCompact.
		f, err := testgen.ReferenceFlatten(s)
		if err != nil {
			t.Fatalf("%s: %s does not flatten: %v", name, s.Name, err)
		}
		for _, d := range f.Spec.Devices {
			if _, dup := c.devices[d.Name]; dup {
				t.Fatalf("%s: device %s twice", name, d.Name)
			}
			c.devices[d.Name] = d
		}
		for _, cs := range f.Spec.SharedCounters {
			if _, dup := c.sets[cs.Name]; dup {
				t.Fatalf("%s: counter set %s twice", name, cs.Name)
			}
			c.sets[cs.Name] = cs
		}
		f.Name = ""
		f.Spec.Devices, f.Spec.SharedCounters, f.Spec.Mixins = nil, nil, nil
		f.Spec.Pool.ResourceSliceCount = 0
		if c.shell == nil {
			c.shell = f
		} else if !equality.Semantic.DeepEqual(c.shell, f) {
			c.shell = nil // slices differ: nothing to compare beyond content
			return c
		}
	}
	return c
}

// checkPool asserts everything Pool promises for one pool.
func checkPool(t *testing.T, name string, in []*api.ResourceSlice, opts Options) ([]*api.ResourceSlice, Stats) {
	t.Helper()
	orig := make([]*api.ResourceSlice, len(in))
	for i, s := range in {
		orig[i] = s.DeepCopy()
	}
	out, st, err := CompactPool(in, opts)
	if err != nil {
		t.Fatalf("%s: Pool: %v", name, err)
	}
	if !equality.Semantic.DeepEqual(in, orig) {
		t.Fatalf("%s: Pool modified its input", name)
	}
	want, got := contentOf(t, name, in), contentOf(t, name, out)
	if !equality.Semantic.DeepEqual(want.devices, got.devices) || !equality.Semantic.DeepEqual(want.sets, got.sets) {
		t.Fatalf("%s: the pool's flattened devices or counter sets changed", name)
	}
	if (want.shell == nil) != (got.shell == nil) || want.shell != nil && !equality.Semantic.DeepEqual(want.shell, got.shell) {
		t.Fatalf("%s: driver, pool, generation or node selection changed", name)
	}
	var names []string
	for _, s := range in {
		names = append(names, s.Name)
	}
	before, after := 0, 0
	at := 0
	for i, s := range out {
		checkLimits(t, name, s, opts)
		if errs := validation.ResourceSlice(s); len(out) < len(in) && len(errs) > 0 {
			t.Fatalf("%s: repacked slice %d does not validate: %v", name, i, errs)
		}
		if len(out) < len(in) && s.Spec.Pool.ResourceSliceCount != int64(len(out)) {
			t.Fatalf("%s: slice %s counts %d slices, the pool has %d", name, s.Name, s.Spec.Pool.ResourceSliceCount, len(out))
		}
		j := slices.Index(names[at:], s.Name)
		if j < 0 {
			t.Fatalf("%s: slice %s is not an input name in input order", name, s.Name)
		}
		at += j + 1
		b, _ := json.Marshal(s)
		after += len(b)
	}
	for _, s := range in {
		b, _ := json.Marshal(s)
		before += len(b)
	}
	if st.BytesBefore != before || st.BytesAfter != after {
		t.Fatalf("%s: stats %+v, encodings before=%d after=%d", name, st, before, after)
	}
	_, each, err := compactEach(in, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.BytesAfter > each.BytesAfter {
		t.Fatalf("%s: repacked pool (%d bytes) larger than compacting each slice (%d)", name, st.BytesAfter, each.BytesAfter)
	}
	return out, st
}

// Random pools (most of them not repackable: their slices differ in node
// selection or break a validation rule) must come back equivalent.
func TestPoolRandom(t *testing.T) {
	for seed := range uint64(60) {
		in := testgen.Pool(rng(seed), testgen.Options{})
		checkPool(t, "seed "+itoa(seed), in, Options{})
		for _, s := range in {
			s.Spec.NodeSelector = nil
		}
		checkPool(t, "one selection, seed "+itoa(seed), in, Options{})
	}
}

// Every generated MIG pool, flat or with mixins, repacks into fewer slices.
func TestPoolMIG(t *testing.T) {
	for _, gpus := range []int{3, 4} {
		for _, form := range []examplegen.Form{examplegen.Flat, examplegen.Mixins} {
			n := examplegen.A100Node
			n.GPUs, n.GPUsPerSlice = gpus, 1
			in := n.Slices(form)
			name := "A100 x" + itoa(uint64(gpus)) + " " + form.String()
			if out, _ := checkPool(t, name, in, Options{}); len(out) >= len(in) {
				t.Errorf("%s: %d slices stayed %d", name, len(in), len(out))
			}
		}
	}
}

func TestPoolNotRepackable(t *testing.T) {
	pool := examplegen.DGXH100Node.Slices(examplegen.Flat)
	// An incomplete pool: a slice not given may hold anything.
	out, _ := checkPool(t, "incomplete", pool[:3], Options{})
	if len(out) != 3 {
		t.Fatalf("incomplete pool repacked into %d slices", len(out))
	}
	// Slices that differ in more than content.
	pool[2].Labels = map[string]string{"rack": "a"}
	if out, _ := checkPool(t, "labels", pool, Options{}); len(out) != len(pool) {
		t.Fatalf("slices with different labels repacked into %d slices", len(out))
	}
}

// The flat DGX H100 pool is cut for the v1 limit of 64 devices with
// counters; in mixin form two slices hold its 152 devices and define each
// mixin twice instead of four times.
func TestPoolH100(t *testing.T) {
	in := examplegen.DGXH100Node.Slices(examplegen.Flat)
	out, st := checkPool(t, "H100", in, Options{})
	t.Logf("H100 x8 pool: %d slices, %d -> %d bytes (%.2fx)", len(out), st.BytesBefore, st.BytesAfter, float64(st.BytesBefore)/float64(st.BytesAfter))
	if len(out) != 3 {
		t.Errorf("want a counter slice and two device slices, got %d slices", len(out))
	}
	if 4*st.BytesAfter > st.BytesBefore {
		t.Errorf("H100 pool compacted %.2fx, want at least 4x", float64(st.BytesBefore)/float64(st.BytesAfter))
	}
}

func TestPoolA100(t *testing.T) {
	in := examplegen.A100Node.Slices(examplegen.Flat)
	out, st := checkPool(t, "A100", in, Options{})
	t.Logf("A100 x2 pool: %d -> %d slices, %d -> %d bytes (%.2fx)", len(in), len(out), st.BytesBefore, st.BytesAfter, float64(st.BytesBefore)/float64(st.BytesAfter))
}
