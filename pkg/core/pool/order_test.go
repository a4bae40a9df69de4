package pool_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
)

// consumes is a device taking amounts (counter=quantity pairs) from set.
func consumes(name, set string, kv ...string) api.Device {
	c := map[string]api.Counter{}
	for i := 0; i < len(kv); i += 2 {
		c[kv[i]] = api.Counter{Value: resource.MustParse(kv[i+1])}
	}
	return api.Device{Name: name, ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: set, Counters: c}}}
}

func TestOrderWarnings(t *testing.T) {
	sets := counterSlice("counters", 2, counterSet("gpu-0", "memory", "slice-0", "slice-1"), counterSet("gpu-1", "memory"))
	for _, tc := range []struct {
		name string
		devs []api.Device
		// want: "larger<smaller" per warning, in device order.
		want []string
	}{
		{"smallest first", []api.Device{
			consumes("part-0", "gpu-0", "memory", "10Gi"), consumes("part-1", "gpu-0", "memory", "10Gi"), consumes("whole", "gpu-0", "memory", "40Gi"),
		}, nil},
		{"whole first", []api.Device{
			consumes("whole", "gpu-0", "memory", "40Gi"), consumes("part-0", "gpu-0", "memory", "10Gi"), consumes("part-1", "gpu-0", "memory", "10Gi"),
		}, []string{"whole<part-0"}},
		{"each larger one once, naming the first smaller after it", []api.Device{
			consumes("whole", "gpu-0", "memory", "40Gi"), consumes("half", "gpu-0", "memory", "20Gi"), consumes("quarter", "gpu-0", "memory", "10Gi"),
		}, []string{"whole<half", "half<quarter"}},
		{"equal devices are not ordered", []api.Device{
			consumes("a", "gpu-0", "memory", "10Gi"), consumes("b", "gpu-0", "memory", "10Gi"),
		}, nil},
		{"more counters is larger", []api.Device{
			consumes("two-slices", "gpu-0", "slice-0", "1", "slice-1", "1"), consumes("one-slice", "gpu-0", "slice-0", "1"),
		}, []string{"two-slices<one-slice"}},
		{"overlapping places are not ordered by size", []api.Device{
			consumes("slice-1-big", "gpu-0", "slice-1", "1", "memory", "20Gi"), consumes("slice-0-small", "gpu-0", "slice-0", "1", "memory", "10Gi"),
		}, nil},
		{"other counter sets are other GPUs", []api.Device{
			consumes("gpu-1-whole", "gpu-1", "memory", "40Gi"), consumes("gpu-0-part", "gpu-0", "memory", "10Gi"),
		}, nil},
		{"more of one counter, less of another, is not larger", []api.Device{
			consumes("a", "gpu-0", "memory", "20Gi", "slice-0", "1"), consumes("b", "gpu-0", "memory", "10Gi", "slice-0", "2"),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pool.Assemble([]*api.ResourceSlice{sets, deviceSlice("devices", 2, tc.devs...)})[0]
			var got []string
			for _, w := range p.OrderWarnings() {
				got = append(got, strings.Fields(w.Message)[1]+"<"+between(w.Message, "listed before ", ","))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("warnings %q, want %q", got, tc.want)
			}
		})
	}
}

// The larger device's slice and field path are named, and a smaller
// device in another slice (later in the pool's order) is named with its
// slice.
func TestOrderWarningAcrossSlices(t *testing.T) {
	p := pool.Assemble([]*api.ResourceSlice{
		counterSlice("counters", 3, counterSet("gpu-0", "memory")),
		deviceSlice("a-devices", 3, consumes("whole", "gpu-0", "memory", "40Gi")),
		deviceSlice("b-devices", 3, consumes("part", "gpu-0", "memory", "10Gi")),
	})[0]
	ws := p.OrderWarnings()
	if len(ws) != 1 {
		t.Fatalf("warnings %v, want 1", ws)
	}
	if w := ws[0]; w.Slice != "a-devices" || w.Field != "spec.devices[0]" || between(w.Message, "listed before ", ",") != "part (ResourceSlice b-devices)" {
		t.Errorf("warning %+v", w)
	}
}

// between is the text of s after the first from and before the next to.
func between(s, from, to string) string {
	_, after, _ := strings.Cut(s, from)
	before, _, _ := strings.Cut(after, to)
	return before
}
