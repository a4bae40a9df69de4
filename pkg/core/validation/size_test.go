package validation_test

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
)

// TestWorstCaseSizes builds the largest slice of each shape that
// admission allows and pins what it takes in the encodings kube-apiserver
// stores (protobuf, in etcd) and serves (JSON). The sizes are in
// docs/upstream.md; a change to a limit or to the shapes shows here first.
// The KEPs size their limits for string attributes; consumable capacity
// with request policies (KEP-5075) came later, and with quantities as long
// as an int64 writes them a plain slice no longer fits etcd's bound, which
// validate then warns about.
func TestWorstCaseSizes(t *testing.T) {
	type size struct{ protobuf, json int }
	want := map[string]size{
		"flat/attributes/devices":                          {802718, 851987},
		"flat/attributes/devices with counters and taints": {780190, 848147},
		"flat/attributes/counter sets":                     {25022, 26842},
		"flat/capacities/devices":                          {1679262, 1834771},
		"flat/capacities/devices with counters and taints": {1218526, 1339539},
		"flat/capacities/counter sets":                     {25022, 26842},
		"mixin/attributes/devices":                         {1333666, 1442246},
		"mixin/attributes/counter sets":                    {45473, 49108},
		"mixin/capacities/devices":                         {2210212, 2424774},
		"mixin/capacities/counter sets":                    {45473, 49108},
	}
	got := map[string]size{}
	for _, form := range []struct {
		name  string
		build func(testgen.Entries) map[string]*api.ResourceSlice
	}{{"flat", testgen.WorstCaseFlat}, {"mixin", testgen.WorstCaseMixin}} {
		for _, entries := range []struct {
			name string
			e    testgen.Entries
		}{{"attributes", testgen.StringAttributes}, {"capacities", testgen.PolicyCapacities}} {
			for shape, s := range form.build(entries.e) {
				key := form.name + "/" + entries.name + "/" + shape
				if errs := validation.ResourceSlice(s); len(errs) > 0 {
					t.Errorf("%s: not admitted, so not a worst case: %v", key, errs.ToAggregate())
					continue
				}
				sz := size{protobuf: validation.StoredSize(s)}
				// JSON as the API server writes it: the v1 object when
				// there is one.
				var obj any = s
				if !s.UsesMixins() {
					v1, err := api.ToUpstream(s)
					if err != nil {
						t.Fatal(err)
					}
					obj = v1
					// StoredSize adds up its parts; a plain slice can be
					// encoded whole to check the sum.
					raw, err := v1.Marshal()
					if err != nil {
						t.Fatal(err)
					}
					u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice}, Raw: raw}
					if whole := 4 + u.Size(); whole != sz.protobuf {
						t.Errorf("%s: StoredSize %d, encoded %d", key, sz.protobuf, whole)
					}
				}
				b, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				sz.json = len(b)
				got[key] = sz
				// The warning fires exactly when the stored size is near
				// the bound.
				warned := false
				for _, w := range validation.ResourceSliceWarnings(s) {
					warned = warned || strings.Contains(w.Message, "etcd stores in one value")
				}
				if warned != (sz.protobuf >= validation.SizeWarningBytes) {
					t.Errorf("%s: %d bytes, warned %t", key, sz.protobuf, warned)
				}
				t.Logf("%-50s protobuf %9d  json %9d", key, sz.protobuf, sz.json)
			}
		}
	}
	for k, g := range got {
		if w, ok := want[k]; !ok || w != g {
			t.Errorf("%s: %+v, pinned %+v", k, g, want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d shapes measured, %d pinned", len(got), len(want))
	}
	// What the KEPs promise: with string attributes, the largest flat
	// slice fits etcd's bound without a warning.
	for _, k := range []string{"flat/attributes/devices", "flat/attributes/devices with counters and taints"} {
		if got[k].protobuf >= validation.SizeWarningBytes {
			t.Errorf("%s: %d bytes stored, at or above the warning at %d", k, got[k].protobuf, validation.SizeWarningBytes)
		}
	}
}
