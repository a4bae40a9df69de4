package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
)

func TestFromV1ToV1IsFlatten(t *testing.T) {
	for seed := range uint64(500) {
		s := testgen.Slice(rng(seed), testgen.Options{})
		v, err := api.ToUpstream(s)
		if err != nil {
			t.Fatalf("seed %d: ToUpstream: %v", seed, err)
		}
		flat, err := api.Flatten(s)
		if err != nil {
			t.Fatal(err)
		}
		flat.APIVersion, flat.Kind = api.APIVersion, api.KindSlice
		if back := api.FromUpstream(v); !equality.Semantic.DeepEqual(back, flat) {
			a, _ := json.Marshal(back)
			b, _ := json.Marshal(flat)
			t.Fatalf("seed %d: FromUpstream(ToUpstream(x)) != Flatten(x)\n got %s\nwant %s", seed, a, b)
		}
	}
}

// Random v1 slices: ToUpstream of flat testgen slices, so every v1 field the
// generator knows is populated.
func TestToV1FromV1RoundTrip(t *testing.T) {
	for seed := range uint64(500) {
		v, err := api.ToUpstream(testgen.Slice(rng(seed), testgen.Options{Mixins: testgen.MixinsNever}))
		if err != nil {
			t.Fatal(err)
		}
		orig := v.DeepCopy()
		back, err := api.ToUpstream(api.FromUpstream(v))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !equality.Semantic.DeepEqual(back, v) {
			t.Fatalf("seed %d: ToUpstream(FromUpstream(v)) != v", seed)
		}
		// Encodings are compared too: Semantic equality would hide a
		// quantity that changed its format on the way.
		a, _ := json.Marshal(back)
		b, _ := json.Marshal(v)
		if string(a) != string(b) {
			t.Fatalf("seed %d: encodings differ\n got %s\nwant %s", seed, a, b)
		}
		// FromUpstream must not alias v: mutating the converted slice leaves v alone.
		c := api.FromUpstream(v)
		mutate(c)
		if !equality.Semantic.DeepEqual(v, orig) {
			t.Fatalf("seed %d: mutating FromUpstream(v) changed v", seed)
		}
	}
}

func TestFlattenWithoutMixinsIsIdentity(t *testing.T) {
	for seed := range uint64(500) {
		s := testgen.Slice(rng(seed), testgen.Options{Mixins: testgen.MixinsNever})
		flat, err := api.Flatten(s)
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(flat, s) {
			t.Fatalf("seed %d: Flatten changed a slice without mixins", seed)
		}
	}
}

func TestDeepCopySharesNoMemory(t *testing.T) {
	for seed := range uint64(500) {
		s := testgen.Slice(rng(seed), testgen.Options{Mixins: testgen.MixinsAlways, Layout: testgen.LayoutCombined})
		before, _ := json.Marshal(s)
		c := s.DeepCopy()
		if !equality.Semantic.DeepEqual(c, s) {
			t.Fatalf("seed %d: DeepCopy is not equal to the original", seed)
		}
		if n := mutate(c); n == 0 {
			t.Fatalf("seed %d: mutate found nothing to change", seed)
		}
		if after, _ := json.Marshal(s); string(after) != string(before) {
			t.Fatalf("seed %d: mutating the copy changed the original", seed)
		}
		// Flatten promises the same independence.
		flat, err := api.Flatten(s)
		if err != nil {
			t.Fatal(err)
		}
		mutate(flat)
		if after, _ := json.Marshal(s); string(after) != string(before) {
			t.Fatalf("seed %d: mutating Flatten's result changed the input", seed)
		}
	}
}

// mutate changes every value reachable through a pointer, map or slice of
// s in place (never by replacing the container), so that any memory shared
// with another slice shows up there. It returns how many places it changed.
func mutate(s *api.ResourceSlice) int {
	n := 0
	bumpQ := func(q *resource.Quantity) { q.Add(resource.MustParse("1")); n++ }
	bumpCounters := func(m map[string]api.Counter) {
		for k, c := range m {
			bumpQ(&c.Value)
			m[k] = c
			m["added-by-mutate"] = api.Counter{}
		}
	}
	bumpStrings := func(xs []string) {
		for i := range xs {
			xs[i] += "-x"
			n++
		}
	}
	bumpAttrs := func(m map[api.QualifiedName]api.DeviceAttribute) {
		for _, a := range m {
			switch {
			case a.IntValue != nil:
				*a.IntValue++
			case a.BoolValue != nil:
				*a.BoolValue = !*a.BoolValue
			case a.StringValue != nil:
				*a.StringValue += "-x"
			case a.VersionValue != nil:
				*a.VersionValue += "-x"
			}
			n++
		}
		if m != nil {
			m["addedByMutate"] = api.DeviceAttribute{}
		}
	}
	bumpCaps := func(m map[api.QualifiedName]api.DeviceCapacity) {
		for k, c := range m {
			bumpQ(&c.Value)
			if p := c.RequestPolicy; p != nil {
				if p.Default != nil {
					bumpQ(p.Default)
				}
				for i := range p.ValidValues {
					bumpQ(&p.ValidValues[i])
				}
				if r := p.ValidRange; r != nil && r.Min != nil {
					bumpQ(r.Min)
				}
			}
			m[k] = c
		}
	}
	sp := &s.Spec
	if sp.NodeName != nil {
		*sp.NodeName += "-x"
		n++
	}
	if sp.NodeSelector != nil {
		for i := range sp.NodeSelector.NodeSelectorTerms {
			for j := range sp.NodeSelector.NodeSelectorTerms[i].MatchExpressions {
				bumpStrings(sp.NodeSelector.NodeSelectorTerms[i].MatchExpressions[j].Values)
			}
		}
	}
	for i := range sp.Devices {
		d := &sp.Devices[i]
		bumpAttrs(d.Attributes)
		bumpCaps(d.Capacity)
		bumpStrings(d.Includes)
		if d.NodeName != nil {
			*d.NodeName += "-x"
			n++
		}
		if d.AllowMultipleAllocations != nil {
			*d.AllowMultipleAllocations = !*d.AllowMultipleAllocations
			n++
		}
		for j := range d.Taints {
			d.Taints[j].Key += "-x"
			n++
		}
		for j := range d.ConsumesCounters {
			bumpCounters(d.ConsumesCounters[j].Counters)
			bumpStrings(d.ConsumesCounters[j].Includes)
			d.ConsumesCounters[j].CounterSet += "-x"
		}
	}
	for i := range sp.SharedCounters {
		bumpCounters(sp.SharedCounters[i].Counters)
		bumpStrings(sp.SharedCounters[i].Includes)
	}
	if m := sp.Mixins; m != nil {
		for i := range m.Device {
			bumpAttrs(m.Device[i].Attributes)
			bumpCaps(m.Device[i].Capacity)
			m.Device[i].Name += "-x"
		}
		for i := range m.DeviceCounterConsumption {
			bumpCounters(m.DeviceCounterConsumption[i].Counters)
		}
		for i := range m.CounterSet {
			bumpCounters(m.CounterSet[i].Counters)
		}
	}
	return n
}

// Unknown includes fail Flatten and ToUpstream with the include's full field
// path, as admission reports it.
func TestUnknownMixinErrorPath(t *testing.T) {
	base := func() *api.ResourceSlice {
		return &api.ResourceSlice{Spec: api.ResourceSliceSpec{
			Mixins: &api.ResourceSliceMixins{
				Device:                   []api.DeviceMixin{{Name: "dm"}},
				DeviceCounterConsumption: []api.DeviceCounterConsumptionMixin{{Name: "cm", Counters: map[string]api.Counter{"c": cnt("1")}}},
				CounterSet:               []api.CounterSetMixin{{Name: "sm", Counters: map[string]api.Counter{"c": cnt("1")}}},
			},
			SharedCounters: []api.CounterSet{{Name: "s0"}, {Name: "s1", Includes: []string{"sm"}}},
			Devices: []api.Device{
				{Name: "d0", Includes: []string{"dm"}},
				{Name: "d1", Includes: []string{"dm"}, ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "s0", Includes: []string{"cm"}}}},
			},
		}}
	}
	for _, tc := range []struct {
		name   string
		break_ func(*api.ResourceSlice)
		prefix string
		kind   api.MixinKind
	}{
		{"device", func(s *api.ResourceSlice) { s.Spec.Devices[1].Includes = []string{"missing"} }, "spec.devices[1].includes[0]", api.MixinDevice},
		{"device second include", func(s *api.ResourceSlice) { s.Spec.Devices[1].Includes = []string{"dm", "missing"} }, "spec.devices[1].includes[1]", api.MixinDevice},
		{"consumption", func(s *api.ResourceSlice) { s.Spec.Devices[1].ConsumesCounters[0].Includes = []string{"missing"} }, "spec.devices[1].consumesCounters[0].includes[0]", api.MixinDeviceCounterConsumption},
		{"counter set", func(s *api.ResourceSlice) { s.Spec.SharedCounters[1].Includes = []string{"sm", "sm", "missing"} }, "spec.sharedCounters[1].includes[2]", api.MixinCounterSet},
		// Kinds have separate namespaces: a device mixin name does not
		// satisfy a consumption include.
		{"wrong kind", func(s *api.ResourceSlice) { s.Spec.Devices[1].ConsumesCounters[0].Includes = []string{"dm"} }, "spec.devices[1].consumesCounters[0].includes[0]", api.MixinDeviceCounterConsumption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			if _, err := api.Flatten(s); err != nil {
				t.Fatalf("valid slice: %v", err)
			}
			tc.break_(s)
			_, err := api.Flatten(s)
			if err == nil || !strings.HasPrefix(err.Error(), tc.prefix+":") {
				t.Fatalf("Flatten error %v, want prefix %q", err, tc.prefix)
			}
			if _, err2 := api.ToUpstream(s); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("ToUpstream error %v, want %v", err2, err)
			}
			// The view reports the include itself, relative to the object.
			ix := api.NewMixinIndex(&s.Spec)
			var verr error
			if tc.kind == api.MixinCounterSet {
				_, verr = ix.CounterSet(&s.Spec.SharedCounters[1])
			} else {
				_, verr = ix.Device(&s.Spec.Devices[1])
			}
			ue, ok := verr.(*api.UnknownMixinError)
			if !ok || ue.Kind != tc.kind {
				t.Fatalf("view error %#v, want *UnknownMixinError of kind %s", verr, tc.kind)
			}
			if want := tc.prefix[strings.Index(tc.prefix, "]")+2:]; !strings.HasPrefix(ue.Error(), want) {
				t.Fatalf("view error %q, want prefix %q", ue.Error(), want)
			}
		})
	}
}

// v1 consumers see no trace of mixins after ToUpstream.
func TestToV1HasNoMixinFields(t *testing.T) {
	for seed := range uint64(100) {
		v, err := api.ToUpstream(testgen.Slice(rng(seed), testgen.Options{Mixins: testgen.MixinsAlways}))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), `"includes"`) || strings.Contains(string(b), `"mixins"`) {
			t.Fatalf("seed %d: ToUpstream output mentions mixins: %s", seed, b)
		}
		var strict resourcev1.ResourceSlice
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&strict); err != nil {
			t.Fatalf("seed %d: ToUpstream output is not a v1 ResourceSlice: %v", seed, err)
		}
	}
}
