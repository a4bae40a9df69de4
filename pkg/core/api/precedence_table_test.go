package api_test

import (
	"maps"
	"testing"

	"github.com/dractl/dractl/pkg/core/api"
)

// The precedence rules of KEP-5234 ("Proposal"), one row each: includes are
// applied in listed order, a later mixin wins over an earlier one, and a
// field set on the object itself wins over every mixin.
func TestPrecedenceTable(t *testing.T) {
	dm := func(name string, kv map[api.QualifiedName]int64) api.DeviceMixin {
		m := api.DeviceMixin{Name: name, Attributes: map[api.QualifiedName]api.DeviceAttribute{}}
		for k, v := range kv {
			m.Attributes[k] = ia(v)
		}
		return m
	}
	mixins := []api.DeviceMixin{
		dm("m1", map[api.QualifiedName]int64{"a": 1, "b": 1, "c": 1}),
		dm("m2", map[api.QualifiedName]int64{"a": 2, "b": 2}),
		dm("m3", map[api.QualifiedName]int64{"a": 3, "d": 3}),
	}
	for _, tc := range []struct {
		name     string
		includes []string
		own      map[api.QualifiedName]int64
		want     map[api.QualifiedName]int64
	}{
		{"single mixin", []string{"m1"}, nil, map[api.QualifiedName]int64{"a": 1, "b": 1, "c": 1}},
		{"later mixin wins", []string{"m1", "m2"}, nil, map[api.QualifiedName]int64{"a": 2, "b": 2, "c": 1}},
		{"order matters", []string{"m2", "m1"}, nil, map[api.QualifiedName]int64{"a": 1, "b": 1, "c": 1}},
		{"last of three wins", []string{"m1", "m2", "m3"}, nil, map[api.QualifiedName]int64{"a": 3, "b": 2, "c": 1, "d": 3}},
		{"middle wins where last is silent", []string{"m3", "m2"}, nil, map[api.QualifiedName]int64{"a": 2, "b": 2, "d": 3}},
		{"device wins over all", []string{"m1", "m2", "m3"}, map[api.QualifiedName]int64{"a": 9, "c": 9}, map[api.QualifiedName]int64{"a": 9, "b": 2, "c": 9, "d": 3}},
		{"device adds its own", []string{"m2"}, map[api.QualifiedName]int64{"z": 5}, map[api.QualifiedName]int64{"a": 2, "b": 2, "z": 5}},
		{"repeated include applies again", []string{"m2", "m1", "m2"}, nil, map[api.QualifiedName]int64{"a": 2, "b": 2, "c": 1}},
		{"no includes", nil, map[api.QualifiedName]int64{"a": 7}, map[api.QualifiedName]int64{"a": 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := api.Device{Name: "dev", Includes: tc.includes}
			for k, v := range tc.own {
				if d.Attributes == nil {
					d.Attributes = map[api.QualifiedName]api.DeviceAttribute{}
				}
				d.Attributes[k] = ia(v)
			}
			s := &api.ResourceSlice{Spec: api.ResourceSliceSpec{Mixins: &api.ResourceSliceMixins{Device: mixins}, Devices: []api.Device{d}}}
			flat, err := api.Flatten(s)
			if err != nil {
				t.Fatal(err)
			}
			got := map[api.QualifiedName]int64{}
			for k, a := range flat.Spec.Devices[0].Attributes {
				got[k] = *a.IntValue
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("Flatten: got %v, want %v", got, tc.want)
			}
			checkViews(t, tc.name, s)
		})
	}
}

// Device mixins carry capacities under the same rules as attributes, and
// an attribute and a capacity of the same name do not shadow each other.
func TestPrecedenceCapacities(t *testing.T) {
	s := &api.ResourceSlice{Spec: api.ResourceSliceSpec{
		Mixins: &api.ResourceSliceMixins{Device: []api.DeviceMixin{
			{Name: "small", Capacity: map[api.QualifiedName]api.DeviceCapacity{"memory": qc("1Gi"), "cores": qc("2")}},
			{Name: "big", Capacity: map[api.QualifiedName]api.DeviceCapacity{"memory": qc("8Gi")}, Attributes: map[api.QualifiedName]api.DeviceAttribute{"cores": sa("attribute")}},
		}},
		Devices: []api.Device{{Name: "dev", Includes: []string{"small", "big"}, Capacity: map[api.QualifiedName]api.DeviceCapacity{"cores": qc("3")}}},
	}}
	flat, err := api.Flatten(s)
	if err != nil {
		t.Fatal(err)
	}
	d := flat.Spec.Devices[0]
	if m := d.Capacity["memory"].Value; m.String() != "8Gi" {
		t.Errorf("memory = %s, want 8Gi from the later mixin", m.String())
	}
	if c := d.Capacity["cores"].Value; c.String() != "3" {
		t.Errorf("cores = %s, want the device's own 3", c.String())
	}
	if a, ok := d.Attributes["cores"]; !ok || a.StringValue == nil || *a.StringValue != "attribute" {
		t.Errorf("attribute cores = %v, want the mixin's string", a)
	}
	checkViews(t, "capacities", s)
}

// A consumption mixin has no counter set: its counters are merged under the
// set named by the including entry, so the same mixin serves several sets,
// and the entry's own counters win.
func TestPrecedenceConsumption(t *testing.T) {
	s := &api.ResourceSlice{Spec: api.ResourceSliceSpec{
		Mixins: &api.ResourceSliceMixins{DeviceCounterConsumption: []api.DeviceCounterConsumptionMixin{
			{Name: "base", Counters: map[string]api.Counter{"memory": cnt("1Gi"), "cores": cnt("1"), "slots": cnt("1")}},
			{Name: "more", Counters: map[string]api.Counter{"cores": cnt("2")}},
		}},
		SharedCounters: []api.CounterSet{{Name: "gpu-0", Counters: map[string]api.Counter{"memory": cnt("8Gi")}}, {Name: "gpu-1", Counters: map[string]api.Counter{"memory": cnt("8Gi")}}},
		Devices: []api.Device{{Name: "dev", ConsumesCounters: []api.DeviceCounterConsumption{
			{CounterSet: "gpu-0", Includes: []string{"base", "more"}},
			{CounterSet: "gpu-1", Includes: []string{"more", "base"}, Counters: map[string]api.Counter{"slots": cnt("5")}},
		}}},
	}}
	flat, err := api.Flatten(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		set      string
		counters map[string]string
	}{
		{"gpu-0", map[string]string{"memory": "1Gi", "cores": "2", "slots": "1"}},
		{"gpu-1", map[string]string{"memory": "1Gi", "cores": "1", "slots": "5"}},
	}
	for i, w := range want {
		c := flat.Spec.Devices[0].ConsumesCounters[i]
		got := map[string]string{}
		for k, v := range c.Counters {
			got[k] = v.Value.String()
		}
		if c.CounterSet != w.set || !maps.Equal(got, w.counters) || c.Includes != nil {
			t.Errorf("consumption %d: set %s counters %v includes %v; want set %s counters %v", i, c.CounterSet, got, c.Includes, w.set, w.counters)
		}
	}
	checkViews(t, "consumption", s)
}

func TestPrecedenceCounterSets(t *testing.T) {
	s := &api.ResourceSlice{Spec: api.ResourceSliceSpec{
		Mixins: &api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{
			{Name: "a100", Counters: map[string]api.Counter{"memory": cnt("40Gi"), "multiprocessors": cnt("98"), "copy-engines": cnt("7")}},
			{Name: "degraded", Counters: map[string]api.Counter{"multiprocessors": cnt("84")}},
		}},
		SharedCounters: []api.CounterSet{
			{Name: "gpu-0", Includes: []string{"a100"}},
			{Name: "gpu-1", Includes: []string{"a100", "degraded"}},
			{Name: "gpu-2", Includes: []string{"degraded", "a100"}, Counters: map[string]api.Counter{"memory": cnt("39Gi")}},
		},
	}}
	flat, err := api.Flatten(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{"memory": "40Gi", "multiprocessors": "98", "copy-engines": "7"},
		{"memory": "40Gi", "multiprocessors": "84", "copy-engines": "7"},
		{"memory": "39Gi", "multiprocessors": "98", "copy-engines": "7"},
	}
	for i, w := range want {
		cs := flat.Spec.SharedCounters[i]
		got := map[string]string{}
		for k, v := range cs.Counters {
			got[k] = v.Value.String()
		}
		if !maps.Equal(got, w) || cs.Includes != nil {
			t.Errorf("%s: counters %v includes %v, want %v", cs.Name, got, cs.Includes, w)
		}
	}
	checkViews(t, "counter sets", s)
}
