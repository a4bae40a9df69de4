package mig

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

// Form selects how a pool is written.
type Form int

const (
	// Flat is plain resource.k8s.io/v1: every device spells out all its
	// attributes, capacities and consumed counters.
	Flat Form = iota
	// Mixins moves what devices or counter sets share into KEP-5234 mixins
	// and lets them include it.
	Mixins
)

func (f Form) String() string {
	if f == Mixins {
		return "mixins"
	}
	return "flat"
}

type (
	attributes = map[api.QualifiedName]api.DeviceAttribute
	capacities = map[api.QualifiedName]api.DeviceCapacity
	counters   = map[string]api.Counter
)

// deviceMixin is a group of attributes and capacities that several devices
// share. In flat form it is copied into each device.
type deviceMixin struct {
	name       string
	attributes attributes
	capacity   capacities
}

// counterMixin is a group of counters shared by several counter sets or
// consumptions.
type counterMixin struct {
	name     string
	counters counters
}

// device is a device before it is written in one form or the other.
type device struct {
	name     string
	includes []deviceMixin
	// attributes and capacity are the device's own, never shared.
	attributes attributes
	capacity   capacities
	// counterSet and consumes describe the device's one counter
	// consumption; consumes is empty for devices that consume nothing.
	counterSet string
	consumes   []counterMixin
	// counters are consumed in addition to consumes.
	counters     counters
	nodeName     *string
	nodeSelector *corev1.NodeSelector
}

// counterSet is a counter set before it is written in one form or the other.
type counterSet struct {
	name     string
	includes []counterMixin
}

// mixinCollector gathers the mixins a slice's devices include, each once,
// in order of first use, so that a slice defines exactly what it uses.
type mixinCollector struct {
	out                          api.ResourceSliceMixins
	device, consumption, counter map[string]bool
}

func newMixinCollector() *mixinCollector {
	return &mixinCollector{device: map[string]bool{}, consumption: map[string]bool{}, counter: map[string]bool{}}
}

func (c *mixinCollector) addDevice(m deviceMixin) string {
	if !c.device[m.name] {
		c.device[m.name] = true
		c.out.Device = append(c.out.Device, api.DeviceMixin{Name: m.name, Attributes: m.attributes, Capacity: m.capacity})
	}
	return m.name
}

func (c *mixinCollector) addConsumption(m counterMixin) string {
	if !c.consumption[m.name] {
		c.consumption[m.name] = true
		c.out.DeviceCounterConsumption = append(c.out.DeviceCounterConsumption, api.DeviceCounterConsumptionMixin{Name: m.name, Counters: m.counters})
	}
	return m.name
}

func (c *mixinCollector) addCounterSet(m counterMixin) string {
	if !c.counter[m.name] {
		c.counter[m.name] = true
		c.out.CounterSet = append(c.out.CounterSet, api.CounterSetMixin{Name: m.name, Counters: m.counters})
	}
	return m.name
}

// result is nil when nothing was collected, so flat slices carry no
// spec.mixins at all.
func (c *mixinCollector) result() *api.ResourceSliceMixins {
	if len(c.out.Device)+len(c.out.DeviceCounterConsumption)+len(c.out.CounterSet) == 0 {
		return nil
	}
	out := c.out
	return &out
}

// merge applies maps in order, later ones winning, which is how KEP-5234
// applies includes before the object's own fields.
func merge[K comparable, V any](ms ...map[K]V) map[K]V {
	var out map[K]V
	for _, m := range ms {
		if len(m) == 0 {
			continue
		}
		if out == nil {
			out = make(map[K]V)
		}
		maps.Copy(out, m)
	}
	return out
}

func writeDevices(devs []device, form Form, mc *mixinCollector) []api.Device {
	out := make([]api.Device, len(devs))
	for i, d := range devs {
		o := api.Device{Name: d.name, NodeName: d.nodeName, NodeSelector: d.nodeSelector}
		if form == Flat {
			as := make([]attributes, 0, len(d.includes)+1)
			cs := make([]capacities, 0, len(d.includes)+1)
			for _, m := range d.includes {
				as, cs = append(as, m.attributes), append(cs, m.capacity)
			}
			o.Attributes = merge(append(as, d.attributes)...)
			o.Capacity = merge(append(cs, d.capacity)...)
		} else {
			for _, m := range d.includes {
				o.Includes = append(o.Includes, mc.addDevice(m))
			}
			o.Attributes, o.Capacity = merge(d.attributes), merge(d.capacity)
		}
		if d.counterSet != "" {
			c := api.DeviceCounterConsumption{CounterSet: d.counterSet}
			if form == Flat {
				cs := make([]counters, 0, len(d.consumes)+1)
				for _, m := range d.consumes {
					cs = append(cs, m.counters)
				}
				c.Counters = merge(append(cs, d.counters)...)
			} else {
				for _, m := range d.consumes {
					c.Includes = append(c.Includes, mc.addConsumption(m))
				}
				c.Counters = merge(d.counters)
			}
			o.ConsumesCounters = []api.DeviceCounterConsumption{c}
		}
		out[i] = o
	}
	return out
}

func writeCounterSets(sets []counterSet, form Form, mc *mixinCollector) []api.CounterSet {
	out := make([]api.CounterSet, len(sets))
	for i, s := range sets {
		o := api.CounterSet{Name: s.name}
		if form == Flat {
			cs := make([]counters, 0, len(s.includes))
			for _, m := range s.includes {
				cs = append(cs, m.counters)
			}
			o.Counters = merge(cs...)
		} else {
			for _, m := range s.includes {
				o.Includes = append(o.Includes, mc.addCounterSet(m))
			}
		}
		out[i] = o
	}
	return out
}

func str(s string) api.DeviceAttribute     { return api.DeviceAttribute{StringValue: ptr.To(s)} }
func version(s string) api.DeviceAttribute { return api.DeviceAttribute{VersionValue: ptr.To(s)} }
func integer(v int) api.DeviceAttribute    { return api.DeviceAttribute{IntValue: ptr.To(int64(v))} }

func quantity(s string) resource.Quantity { return resource.MustParse(s) }

func count(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }
