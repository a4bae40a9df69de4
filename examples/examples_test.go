// Package examples_test checks that every example is what its README says:
// it decodes strictly, passes admission validation, forms complete and
// valid pools, and its claims and classes select devices that exist.
package examples_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/cel"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/validation"
)

// want is what one example directory must contain.
type want struct {
	slices, devices, counterSets, classes, claims, nodes int
	// mixins says whether every ResourceSlice uses KEP-5234 mixins (true)
	// or none does (false).
	mixins bool
	// matches is, per claim and request, how many devices of the example
	// pass both the class and the request selectors.
	matches map[string]int
}

var examples = map[string]want{
	"gpu-partitions": {slices: 2, devices: 5, counterSets: 1, classes: 1, claims: 1, nodes: 1,
		matches: map[string]int{"gpu-partition-10gi/partition": 4}},
	"a100-mig-flat": {slices: 2, devices: 52, counterSets: 2, classes: 2, claims: 1, nodes: 1,
		matches: map[string]int{
			"mig-devices/mig-1g-5gb-0": 14, "mig-devices/mig-1g-5gb-1": 14,
			"mig-devices/mig-2g-10gb": 6, "mig-devices/mig-3g-20gb": 4,
		}},
	"a100-mig-mixins": {slices: 2, devices: 52, counterSets: 2, classes: 2, claims: 1, nodes: 1, mixins: true,
		matches: map[string]int{
			"mig-devices/mig-1g-5gb-0": 14, "mig-devices/mig-1g-5gb-1": 14,
			"mig-devices/mig-2g-10gb": 6, "mig-devices/mig-3g-20gb": 4,
		}},
	"dgx-h100-mixins": {slices: 5, devices: 152, counterSets: 8, classes: 2, claims: 1, nodes: 1, mixins: true,
		matches: map[string]int{"mig-1g-10gb/mig": 56}},
	"tpu-multihost": {slices: 2, devices: 7, counterSets: 1, classes: 1, claims: 2, nodes: 4,
		matches: map[string]int{"tpu-4x4/tpus": 1, "tpu-2x4/tpus": 2}},
}

// summary keeps a failure readable when one mistake repeats on every device.
func summary(errs field.ErrorList) string {
	const show = 5
	var b strings.Builder
	for i, e := range errs {
		if i == show {
			fmt.Fprintf(&b, "; and %d more", len(errs)-show)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func load(t *testing.T, dir string) *decode.Set {
	t.Helper()
	objs, err := decode.Paths([]string{dir}, nil)
	if err != nil {
		t.Fatalf("decode %s: %v", dir, err)
	}
	return decode.Group(objs)
}

// TestEveryDirectoryIsListed keeps the table above in step with the
// directories, so a new example cannot skip these tests.
func TestEveryDirectoryIsListed(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
			if _, err := os.Stat(filepath.Join(e.Name(), "README.md")); err != nil {
				t.Errorf("%s has no README.md", e.Name())
			}
		}
	}
	for _, d := range dirs {
		if _, ok := examples[d]; !ok {
			t.Errorf("directory %s is not in the examples table", d)
		}
	}
	for d := range examples {
		if !slices.Contains(dirs, d) {
			t.Errorf("example %s has no directory", d)
		}
	}
}

func TestExamples(t *testing.T) {
	for dir, w := range examples {
		t.Run(dir, func(t *testing.T) {
			set := load(t, dir)
			checkCounts(t, set, w)
			checkAdmission(t, set)
			checkPools(t, set)
			checkNodes(t, set)
			checkSelectors(t, set, w)
		})
	}
}

func checkCounts(t *testing.T, set *decode.Set, w want) {
	t.Helper()
	devices, sets := 0, 0
	for _, s := range set.Slices {
		devices += len(s.Spec.Devices)
		sets += len(s.Spec.SharedCounters)
		if s.UsesMixins() != w.mixins {
			t.Errorf("ResourceSlice %s: UsesMixins() = %v, want %v", s.Name, s.UsesMixins(), w.mixins)
		}
	}
	got := [...]int{len(set.Slices), devices, sets, len(set.Classes), len(set.Claims), len(set.Nodes)}
	exp := [...]int{w.slices, w.devices, w.counterSets, w.classes, w.claims, w.nodes}
	if got != exp {
		t.Errorf("slices, devices, counter sets, classes, claims, nodes = %v, want %v", got, exp)
	}
}

func checkAdmission(t *testing.T, set *decode.Set) {
	t.Helper()
	for _, s := range set.Slices {
		if errs := validation.ResourceSlice(s); len(errs) > 0 {
			t.Errorf("ResourceSlice %s: %v", s.Name, summary(errs))
		}
	}
	for _, c := range set.Classes {
		if errs := validation.DeviceClass(c); len(errs) > 0 {
			t.Errorf("DeviceClass %s: %v", c.Name, summary(errs))
		}
	}
	for _, c := range set.Claims {
		if errs := validation.ResourceClaim(c); len(errs) > 0 {
			t.Errorf("ResourceClaim %s: %v", c.Name, summary(errs))
		}
	}
}

// checkPools: each example is one pool, complete and valid, so the
// allocator would use it rather than skip it or fail on it.
func checkPools(t *testing.T, set *decode.Set) {
	t.Helper()
	pools := pool.Assemble(set.Slices)
	if len(pools) != 1 {
		t.Fatalf("%d pools, want 1", len(pools))
	}
	p := pools[0]
	if !p.Complete() {
		t.Errorf("pool %s: %d of %d slices", p.ID, len(p.Slices), p.SliceCount)
	}
	if p.Obsolete != 0 {
		t.Errorf("pool %s: %d obsolete slices", p.ID, p.Obsolete)
	}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
}

// checkNodes: every node a slice or device names or selects by hostname is
// one of the example's Node objects.
func checkNodes(t *testing.T, set *decode.Set) {
	t.Helper()
	nodes := make(map[string]bool)
	for _, n := range set.Nodes {
		if n.Labels[corev1.LabelHostname] != n.Name {
			t.Errorf("Node %s: label %s=%q", n.Name, corev1.LabelHostname, n.Labels[corev1.LabelHostname])
		}
		nodes[n.Name] = true
	}
	check := func(where string, name *string, sel *corev1.NodeSelector) {
		var refs []string
		if name != nil {
			refs = append(refs, *name)
		}
		if sel != nil {
			for _, term := range sel.NodeSelectorTerms {
				for _, req := range term.MatchExpressions {
					if req.Key == corev1.LabelHostname {
						refs = append(refs, req.Values...)
					}
				}
			}
		}
		for _, r := range refs {
			if !nodes[r] {
				t.Errorf("%s refers to node %s, which the example does not define", where, r)
			}
		}
	}
	for _, s := range set.Slices {
		check("ResourceSlice "+s.Name, s.Spec.NodeName, s.Spec.NodeSelector)
		for _, d := range s.Spec.Devices {
			check("ResourceSlice "+s.Name+" device "+d.Name, d.NodeName, d.NodeSelector)
		}
	}
}

// checkSelectors evaluates each claim request the way the allocator
// filters candidates: the class selectors first, then the request's, and
// counts the devices that pass. A misspelt domain or attribute shows up as
// an error or as zero matches.
func checkSelectors(t *testing.T, set *decode.Set, w want) {
	t.Helper()
	ctx := context.Background()
	classes := make(map[string]*resourcev1.DeviceClass)
	for _, c := range set.Classes {
		classes[c.Name] = c
	}
	var devices []cel.Device
	for _, s := range set.Slices {
		ix := api.NewMixinIndex(&s.Spec)
		for i := range s.Spec.Devices {
			v, err := ix.Device(&s.Spec.Devices[i])
			if err != nil {
				t.Fatal(err)
			}
			devices = append(devices, cel.Device{Driver: s.Spec.Driver, View: v})
		}
	}
	matchAll := func(sels []resourcev1.DeviceSelector, d cel.Device) bool {
		for _, sel := range sels {
			if sel.CEL == nil {
				continue
			}
			prog, err := cel.Default().Compile(sel.CEL.Expression)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := prog.Matches(ctx, d)
			if err != nil {
				t.Fatalf("device %s: %v", d.View.Device.Name, err)
			}
			if !ok {
				return false
			}
		}
		return true
	}
	got := make(map[string]int)
	for _, c := range set.Claims {
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly == nil {
				t.Fatalf("claim %s request %s: only exactly requests are expected", c.Name, r.Name)
			}
			class, ok := classes[r.Exactly.DeviceClassName]
			if !ok {
				t.Errorf("claim %s request %s: no DeviceClass %s in the example", c.Name, r.Name, r.Exactly.DeviceClassName)
				continue
			}
			key := c.Name + "/" + r.Name
			got[key] = 0
			for _, d := range devices {
				if matchAll(class.Spec.Selectors, d) && matchAll(r.Exactly.Selectors, d) {
					got[key]++
				}
			}
		}
	}
	if !equality.Semantic.DeepEqual(got, w.matches) {
		t.Errorf("matching devices per request = %v, want %v", got, w.matches)
	}
}

// TestMIGFormsAgree: the flat and the mixin A100 examples describe the same
// pool. Slice by slice, flattening the mixin form gives the flat form's
// devices and counter sets.
func TestMIGFormsAgree(t *testing.T) {
	flat, mixed := load(t, "a100-mig-flat").Slices, load(t, "a100-mig-mixins").Slices
	if len(flat) != len(mixed) {
		t.Fatalf("%d flat slices, %d mixin slices", len(flat), len(mixed))
	}
	for i := range flat {
		got, err := api.Flatten(mixed[i])
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != flat[i].Name {
			t.Errorf("slice %d: %s vs %s", i, got.Name, flat[i].Name)
		}
		if !equality.Semantic.DeepEqual(got.Spec.Devices, flat[i].Spec.Devices) {
			t.Errorf("slice %s: devices differ once flattened", flat[i].Name)
		}
		if !equality.Semantic.DeepEqual(got.Spec.SharedCounters, flat[i].Spec.SharedCounters) {
			t.Errorf("slice %s: counter sets differ once flattened", flat[i].Name)
		}
		if !equality.Semantic.DeepEqual(got, flat[i]) {
			t.Errorf("slice %s: differs once flattened outside devices and counter sets", flat[i].Name)
		}
	}
}

// TestDGXFlattensToV1: the mixin example can be served to a cluster without
// DRAResourceSliceMixins by flattening it, since every flattened slice
// still passes v1 validation (64 devices with counters, 8 counter sets).
func TestDGXFlattensToV1(t *testing.T) {
	var flat []*api.ResourceSlice
	devices := 0
	for _, s := range load(t, "dgx-h100-mixins").Slices {
		f, err := api.Flatten(s)
		if err != nil {
			t.Fatal(err)
		}
		if f.UsesMixins() {
			t.Errorf("%s still uses mixins after Flatten", f.Name)
		}
		if errs := validation.ResourceSlice(f); len(errs) > 0 {
			t.Errorf("flattened %s: %v", f.Name, summary(errs))
		}
		if _, err := api.ToUpstream(f); err != nil {
			t.Errorf("flattened %s does not convert to v1: %v", f.Name, err)
		}
		devices += len(f.Spec.Devices)
		flat = append(flat, f)
	}
	if devices != 152 {
		t.Errorf("%d devices, want 152 (8 GPUs × (full GPU + 18 MIG placements))", devices)
	}
	for _, p := range pool.Assemble(flat) {
		if err := p.Validate(); err != nil {
			t.Error(err)
		}
	}
}

// TestGeneratedFilesAreMarked: the files examplegen owns say so, and the
// hand-written ones do not claim to be generated. A hand edit of a
// generated file is caught by internal/testing/examplegen's golden test.
func TestGeneratedFilesAreMarked(t *testing.T) {
	gen, err := examplegen.Files()
	if err != nil {
		t.Fatal(err)
	}
	var generated []string
	for _, f := range gen {
		generated = append(generated, f.Path)
	}
	files, err := filepath.Glob("*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		isGen := strings.HasPrefix(string(data), examplegen.GeneratedHeader)
		if want := slices.Contains(generated, filepath.ToSlash(f)); isGen != want {
			t.Errorf("%s: generated header %v, want %v", f, isGen, want)
		}
	}
}
