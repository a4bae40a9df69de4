package pool_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
)

const (
	driver   = "gpu.example.com"
	poolName = "node-1"
)

func slice(name, drv, pl string, gen, count int64) *api.ResourceSlice {
	s := &api.ResourceSlice{Spec: api.ResourceSliceSpec{
		Driver: drv,
		Pool:   api.ResourcePool{Name: pl, Generation: gen, ResourceSliceCount: count},
	}}
	s.Name = name
	return s
}

func counters(names ...string) map[string]api.Counter {
	out := make(map[string]api.Counter, len(names))
	for _, n := range names {
		out[n] = api.Counter{Value: resource.MustParse("1")}
	}
	return out
}

func counterSet(name string, names ...string) api.CounterSet {
	return api.CounterSet{Name: name, Counters: counters(names...)}
}

// device consumes one of each named counter from set; with no set it
// consumes nothing.
func device(name, set string, names ...string) api.Device {
	d := api.Device{Name: name}
	if set != "" {
		d.ConsumesCounters = []api.DeviceCounterConsumption{{CounterSet: set, Counters: counters(names...)}}
	}
	return d
}

// counterSlice and deviceSlice build the two kinds of slice KEP-4815
// requires (sharedCounters XOR devices), in pool poolName, generation 1.
func counterSlice(name string, count int64, sets ...api.CounterSet) *api.ResourceSlice {
	s := slice(name, driver, poolName, 1, count)
	s.Spec.SharedCounters = sets
	return s
}

func deviceSlice(name string, count int64, devs ...api.Device) *api.ResourceSlice {
	s := slice(name, driver, poolName, 1, count)
	s.Spec.Devices = devs
	return s
}

// summary is what a test expects of one assembled pool.
type summary struct {
	ID         pool.ID
	Generation int64
	SliceCount int64
	Slices     []string
	Obsolete   int
	Complete   bool
}

func summarize(ps []*pool.Pool) []summary {
	out := make([]summary, len(ps))
	for i, p := range ps {
		names := make([]string, len(p.Slices))
		for j, s := range p.Slices {
			names[j] = s.Name
		}
		out[i] = summary{p.ID, p.Generation, p.SliceCount, names, p.Obsolete, p.Complete()}
	}
	return out
}

func TestAssemble(t *testing.T) {
	id := pool.ID{Driver: driver, Pool: poolName}
	for _, tc := range []struct {
		name string
		in   []*api.ResourceSlice
		want []summary
	}{
		{
			name: "no slices",
			want: []summary{},
		},
		{
			// KEP-4815: resourceSliceCount counts slices with counter sets
			// too, so a device slice alone is not a complete pool.
			name: "counter-set slice counts towards completeness",
			in: []*api.ResourceSlice{
				counterSlice("b-counters", 2, counterSet("gpu-0", "memory")),
				deviceSlice("a-devices", 2, device("gpu-0", "gpu-0", "memory")),
			},
			want: []summary{{id, 1, 2, []string{"a-devices", "b-counters"}, 0, true}},
		},
		{
			name: "missing counter-set slice leaves the pool incomplete",
			in:   []*api.ResourceSlice{deviceSlice("devices", 2, device("gpu-0", "gpu-0", "memory"))},
			want: []summary{{id, 1, 2, []string{"devices"}, 0, false}},
		},
		{
			name: "highest generation wins when it comes last",
			in: []*api.ResourceSlice{
				slice("s1", driver, poolName, 1, 2),
				slice("s2", driver, poolName, 1, 2),
				slice("s3", driver, poolName, 2, 1),
			},
			want: []summary{{id, 2, 1, []string{"s3"}, 2, true}},
		},
		{
			name: "highest generation wins when it comes first",
			in: []*api.ResourceSlice{
				slice("s3", driver, poolName, 2, 1),
				slice("s1", driver, poolName, 1, 2),
				slice("s2", driver, poolName, 1, 2),
			},
			want: []summary{{id, 2, 1, []string{"s3"}, 2, true}},
		},
		{
			// An update in progress: one slice of the new generation is
			// published, the other is not yet. Only the new one counts,
			// and the pool waits for the rest.
			name: "new generation incomplete while old slices are obsolete",
			in: []*api.ResourceSlice{
				slice("s1", driver, poolName, 3, 2),
				slice("s2", driver, poolName, 3, 2),
				slice("s1", driver, poolName, 4, 2),
			},
			want: []summary{{id, 4, 2, []string{"s1"}, 2, false}},
		},
		{
			name: "pools sorted by driver then pool, slices by name",
			in: []*api.ResourceSlice{
				slice("z", "b.example.com", "p", 1, 1),
				slice("y", "a.example.com", "q", 1, 2),
				slice("x", "a.example.com", "q", 1, 2),
				slice("w", "a.example.com", "p", 1, 1),
			},
			want: []summary{
				{pool.ID{Driver: "a.example.com", Pool: "p"}, 1, 1, []string{"w"}, 0, true},
				{pool.ID{Driver: "a.example.com", Pool: "q"}, 1, 2, []string{"x", "y"}, 0, true},
				{pool.ID{Driver: "b.example.com", Pool: "p"}, 1, 1, []string{"z"}, 0, true},
			},
		},
		{
			name: "same pool name under two drivers are two pools",
			in: []*api.ResourceSlice{
				slice("a", "one.example.com", "shared", 1, 1),
				slice("b", "two.example.com", "shared", 5, 1),
			},
			want: []summary{
				{pool.ID{Driver: "one.example.com", Pool: "shared"}, 1, 1, []string{"a"}, 0, true},
				{pool.ID{Driver: "two.example.com", Pool: "shared"}, 5, 1, []string{"b"}, 0, true},
			},
		},
		{
			// Validate reports the disagreement; Assemble must not let the
			// smaller count make the pool look complete.
			name: "disagreeing counts: the largest is the pool's",
			in: []*api.ResourceSlice{
				slice("a", driver, poolName, 1, 2),
				slice("b", driver, poolName, 1, 3),
			},
			want: []summary{{id, 1, 3, []string{"a", "b"}, 0, false}},
		},
		{
			name: "more slices than declared is not complete",
			in: []*api.ResourceSlice{
				slice("a", driver, poolName, 1, 1),
				slice("b", driver, poolName, 1, 1),
			},
			want: []summary{{id, 1, 1, []string{"a", "b"}, 0, false}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(pool.Assemble(tc.in))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Assemble:\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

// problem is a pool.Problem reduced to what a reader of the message sees.
type problem struct {
	Slice  string
	Type   field.ErrorType
	Field  string
	Value  any
	Detail string
}

func (p problem) String() string {
	return fmt.Sprintf("%s: %s %s %v %q", p.Slice, p.Field, p.Type, p.Value, p.Detail)
}

func problems(err *pool.InvalidError) []problem {
	if err == nil {
		return nil
	}
	out := make([]problem, len(err.Problems))
	for i, p := range err.Problems {
		out[i] = problem{p.Slice, p.Err.Type, p.Err.Field, p.Err.BadValue, p.Err.Detail}
	}
	return out
}

func join(ps []problem) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "\n  ")
}

func withMixins(s *api.ResourceSlice, m api.ResourceSliceMixins) *api.ResourceSlice {
	s.Spec.Mixins = &m
	return s
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []*api.ResourceSlice
		want []problem
	}{
		{
			name: "valid partitionable pool",
			in: []*api.ResourceSlice{
				counterSlice("counters", 2, counterSet("gpu-0", "memory", "memory-slice-0")),
				deviceSlice("devices", 2,
					device("gpu-0-part-0", "gpu-0", "memory", "memory-slice-0"),
					device("gpu-0", "gpu-0", "memory", "memory-slice-0")),
			},
		},
		{
			name: "pool without counters",
			in:   []*api.ResourceSlice{deviceSlice("devices", 1, device("a", ""), device("b", ""))},
		},
		{
			name: "duplicate device names across slices",
			in: []*api.ResourceSlice{
				deviceSlice("s1", 2, device("gpu-0", ""), device("gpu-1", "")),
				deviceSlice("s2", 2, device("gpu-2", ""), device("gpu-1", "")),
			},
			want: []problem{{"s2", field.ErrorTypeDuplicate, "spec.devices[1].name", "gpu-1 (also in ResourceSlice s1 spec.devices[1])", ""}},
		},
		{
			name: "duplicate device names within a slice",
			in:   []*api.ResourceSlice{deviceSlice("s1", 1, device("gpu-0", ""), device("gpu-0", ""))},
			want: []problem{{"s1", field.ErrorTypeDuplicate, "spec.devices[1].name", "gpu-0 (also in ResourceSlice s1 spec.devices[0])", ""}},
		},
		{
			// The first definition is the one devices consume from, so
			// gpu-0's consumption of "memory" is checked against it.
			name: "duplicate counter set names across slices",
			in: []*api.ResourceSlice{
				counterSlice("c1", 3, counterSet("gpu-0", "memory")),
				counterSlice("c2", 3, counterSet("gpu-1", "memory"), counterSet("gpu-0", "decoders")),
				deviceSlice("d", 3, device("gpu-0", "gpu-0", "memory")),
			},
			want: []problem{{"c2", field.ErrorTypeDuplicate, "spec.sharedCounters[1].name", "gpu-0 (also in ResourceSlice c1 spec.sharedCounters[0])", ""}},
		},
		{
			name: "consumed counter set does not exist",
			in: []*api.ResourceSlice{
				counterSlice("c", 2, counterSet("gpu-0", "memory")),
				deviceSlice("d", 2, device("gpu-0", "gpu-0", "memory"), device("gpu-1", "gpu-1", "memory")),
			},
			want: []problem{{"d", field.ErrorTypeNotFound, "spec.devices[1].consumesCounters[0].counterSet", "gpu-1", ""}},
		},
		{
			name: "consumed counter missing in its set",
			in: []*api.ResourceSlice{
				counterSlice("c", 2, counterSet("gpu-0", "memory", "memory-slice-0")),
				deviceSlice("d", 2, device("gpu-0", "gpu-0", "memory", "memory-slice-1")),
			},
			want: []problem{{"d", field.ErrorTypeNotFound, "spec.devices[0].consumesCounters[0].counters[memory-slice-1]",
				"memory-slice-1 (counter set gpu-0 has no such counter)", ""}},
		},
		{
			// The counter comes from a consumption mixin, not from the
			// device; the path is still the consumption's.
			name: "consumed counter missing in its set, via a consumption mixin",
			in: []*api.ResourceSlice{
				counterSlice("c", 2, counterSet("gpu-0", "memory")),
				withMixins(deviceSlice("d", 2, api.Device{Name: "gpu-0-mig", ConsumesCounters: []api.DeviceCounterConsumption{{
					CounterSet: "gpu-0", Includes: []string{"mig-1g"},
				}}}), api.ResourceSliceMixins{
					DeviceCounterConsumption: []api.DeviceCounterConsumptionMixin{{Name: "mig-1g", Counters: counters("memory", "jpeg-engines")}},
				}),
			},
			want: []problem{{"d", field.ErrorTypeNotFound, "spec.devices[0].consumesCounters[0].counters[jpeg-engines]",
				"jpeg-engines (counter set gpu-0 has no such counter)", ""}},
		},
		{
			name: "counters provided by a counter-set mixin",
			in: []*api.ResourceSlice{
				withMixins(counterSlice("c", 2, api.CounterSet{Name: "gpu-0", Includes: []string{"a100"}}),
					api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{{Name: "a100", Counters: counters("memory", "decoders")}}}),
				deviceSlice("d", 2, device("gpu-0", "gpu-0", "memory", "decoders")),
			},
		},
		{
			name: "consumed counter missing in a set built from a counter-set mixin",
			in: []*api.ResourceSlice{
				withMixins(counterSlice("c", 2, api.CounterSet{Name: "gpu-0", Includes: []string{"a100"}, Counters: counters("memory-slice-0")}),
					api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{{Name: "a100", Counters: counters("memory")}}}),
				deviceSlice("d", 2, device("gpu-0", "gpu-0", "memory", "memory-slice-0", "ofa-engines")),
			},
			want: []problem{{"d", field.ErrorTypeNotFound, "spec.devices[0].consumesCounters[0].counters[ofa-engines]",
				"ofa-engines (counter set gpu-0 has no such counter)", ""}},
		},
		{
			name: "disagreeing resourceSliceCount",
			in: []*api.ResourceSlice{
				counterSlice("c", 2, counterSet("gpu-0", "memory")),
				deviceSlice("d", 3, device("gpu-0", "gpu-0", "memory")),
			},
			want: []problem{{"c", field.ErrorTypeInvalid, "spec.pool.resourceSliceCount", int64(2),
				"other slices of pool gpu.example.com/node-1 generation 1 declare 3"}},
		},
		{
			name: "unknown device mixin",
			in: []*api.ResourceSlice{
				withMixins(deviceSlice("d", 1, api.Device{Name: "gpu-0", Includes: []string{"common", "a100"}}),
					api.ResourceSliceMixins{Device: []api.DeviceMixin{{Name: "common"}}}),
			},
			want: []problem{{"d", field.ErrorTypeNotFound, "spec.devices[0].includes[1]", "a100", ""}},
		},
		{
			name: "unknown consumption mixin",
			in: []*api.ResourceSlice{
				counterSlice("c", 2, counterSet("gpu-0", "memory")),
				deviceSlice("d", 2, api.Device{Name: "gpu-0", ConsumesCounters: []api.DeviceCounterConsumption{{
					CounterSet: "gpu-0", Includes: []string{"whole-gpu"},
				}}}),
			},
			want: []problem{{"d", field.ErrorTypeNotFound, "spec.devices[0].consumesCounters[0].includes[0]", "whole-gpu", ""}},
		},
		{
			// A counter set that cannot be read is not a counter set the
			// devices can consume from, so its consumers are reported too.
			name: "unknown counter-set mixin",
			in: []*api.ResourceSlice{
				counterSlice("c", 2, api.CounterSet{Name: "gpu-0", Includes: []string{"a100"}}),
				deviceSlice("d", 2, device("gpu-0", "gpu-0", "memory")),
			},
			want: []problem{
				{"c", field.ErrorTypeNotFound, "spec.sharedCounters[0].includes[0]", "a100", ""},
				{"d", field.ErrorTypeNotFound, "spec.devices[0].consumesCounters[0].counterSet", "gpu-0", ""},
			},
		},
		{
			name: "mixins of another slice are not visible",
			in: []*api.ResourceSlice{
				withMixins(counterSlice("c", 2, counterSet("gpu-0", "memory")),
					api.ResourceSliceMixins{Device: []api.DeviceMixin{{Name: "common"}}}),
				deviceSlice("d", 2, api.Device{Name: "gpu-0", Includes: []string{"common"}}),
			},
			want: []problem{{"d", field.ErrorTypeNotFound, "spec.devices[0].includes[0]", "common", ""}},
		},
		{
			name: "every problem is reported, in slice order",
			in: []*api.ResourceSlice{
				counterSlice("a", 3, counterSet("gpu-0", "memory"), counterSet("gpu-0", "memory")),
				deviceSlice("b", 2, device("gpu-0", "gpu-0", "memory", "decoders"), device("gpu-0", "gpu-9", "memory")),
			},
			want: []problem{
				{"b", field.ErrorTypeInvalid, "spec.pool.resourceSliceCount", int64(2),
					"other slices of pool gpu.example.com/node-1 generation 1 declare 3"},
				{"a", field.ErrorTypeDuplicate, "spec.sharedCounters[1].name", "gpu-0 (also in ResourceSlice a spec.sharedCounters[0])", ""},
				{"b", field.ErrorTypeNotFound, "spec.devices[0].consumesCounters[0].counters[decoders]",
					"decoders (counter set gpu-0 has no such counter)", ""},
				{"b", field.ErrorTypeDuplicate, "spec.devices[1].name", "gpu-0 (also in ResourceSlice b spec.devices[0])", ""},
				{"b", field.ErrorTypeNotFound, "spec.devices[1].consumesCounters[0].counterSet", "gpu-9", ""},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := pool.Assemble(tc.in)
			if len(ps) != 1 {
				t.Fatalf("%d pools, want 1", len(ps))
			}
			err := ps[0].Validate()
			got := problems(err)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate:\n got  %s\n want %s", join(got), join(tc.want))
			}
			if err != nil && err.Pool != ps[0].ID {
				t.Errorf("InvalidError.Pool = %v, want %v", err.Pool, ps[0].ID)
			}
		})
	}
}

// TestInvalidErrorMessage pins the message the allocator surfaces to users:
// pool, slice, field path and reason in one line per problem.
func TestInvalidErrorMessage(t *testing.T) {
	ps := pool.Assemble([]*api.ResourceSlice{
		counterSlice("c", 2, counterSet("gpu-0", "memory")),
		deviceSlice("d", 2, device("gpu-0", "gpu-1", "memory"), device("gpu-1", "gpu-0", "cores")),
	})
	err := ps[0].Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want an error")
	}
	want := `pool gpu.example.com/node-1 is invalid: ` +
		`ResourceSlice d: spec.devices[0].consumesCounters[0].counterSet: Not found: "gpu-1"; ` +
		`ResourceSlice d: spec.devices[1].consumesCounters[0].counters[cores]: Not found: "cores (counter set gpu-0 has no such counter)"`
	if got := err.Error(); got != want {
		t.Errorf("Error():\n got  %s\n want %s", got, want)
	}
}

// TestValidateOnlyCurrentGeneration: an obsolete slice is ignored by
// Validate too, so a driver that fixed a duplicate in a new generation
// gets a valid pool.
func TestValidateOnlyCurrentGeneration(t *testing.T) {
	old := deviceSlice("old", 1, device("gpu-0", ""))
	cur := deviceSlice("new", 1, device("gpu-0", ""))
	cur.Spec.Pool.Generation = 2
	ps := pool.Assemble([]*api.ResourceSlice{old, cur})
	if len(ps) != 1 || ps[0].Obsolete != 1 {
		t.Fatalf("Assemble: %+v", summarize(ps))
	}
	if err := ps[0].Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

// TestCounterSets: the pool's counter sets with includes resolved, the first
// definition of a duplicated name, and none for unresolvable includes.
func TestCounterSets(t *testing.T) {
	ps := pool.Assemble([]*api.ResourceSlice{
		withMixins(counterSlice("a", 2,
			api.CounterSet{Name: "gpu-0", Includes: []string{"a100"}, Counters: counters("memory-slice-0")},
			api.CounterSet{Name: "gpu-1", Includes: []string{"h100"}}),
			api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{{Name: "a100", Counters: counters("memory")}}}),
		counterSlice("b", 2, counterSet("gpu-0", "decoders")),
	})
	sets := ps[0].CounterSets()
	if len(sets) != 1 {
		t.Fatalf("CounterSets() has %d sets, want only gpu-0", len(sets))
	}
	cs, ok := sets["gpu-0"]
	if !ok || cs.Slice.Name != "a" || cs.Index != 0 {
		t.Fatalf("gpu-0 from %v index %d, want slice a index 0", cs.Slice, cs.Index)
	}
	for _, c := range []string{"memory", "memory-slice-0"} {
		if _, ok := cs.Counter(c); !ok {
			t.Errorf("gpu-0 lacks %s", c)
		}
	}
	if _, ok := cs.Counter("decoders"); ok {
		t.Error("gpu-0 has decoders, which only the duplicate in slice b defines")
	}
}

// TestValidateAll: every pool's error lands at its index and is what
// Validate reports, whichever worker judged it.
func TestValidateAll(t *testing.T) {
	var in []*api.ResourceSlice
	for i := range 40 {
		s := deviceSlice("s", 1, device("gpu-0", ""), device("gpu-1", ""))
		s.Spec.Pool.Name = fmt.Sprintf("node-%02d", i)
		if i%3 == 0 {
			s.Spec.Devices[1].Name = "gpu-0" // duplicate device name
		}
		in = append(in, s)
	}
	pools := pool.Assemble(in)
	errs := pool.ValidateAll(pools)
	if len(errs) != len(pools) {
		t.Fatalf("%d results for %d pools", len(errs), len(pools))
	}
	invalid := 0
	for i, p := range pools {
		if want := p.Validate(); !reflect.DeepEqual(errs[i], want) {
			t.Errorf("pool %s: ValidateAll says %v, Validate %v", p.ID, errs[i], want)
		}
		if errs[i] != nil {
			invalid++
		}
	}
	if invalid != 14 {
		t.Errorf("%d invalid pools, want 14", invalid)
	}
}
