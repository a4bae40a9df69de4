package testgen

import (
	"fmt"

	"github.com/dractl/dractl/pkg/core/api"
)

// ReferenceFlatten is a deliberately naive, eager statement of the
// KEP-5234 precedence rules (KEP-5234 "Proposal"), written independently
// of pkg/core/api so that tests have an oracle to hold api.Flatten and the lazy
// views against: start empty, copy each included mixin in listed order
// (later ones overwrite), then copy the object's own entries over all of
// them. Values are shared with s, not copied; callers only compare.
func ReferenceFlatten(s *api.ResourceSlice) (*api.ResourceSlice, error) {
	out := s.DeepCopy()
	out.Spec.Mixins = nil
	var m api.ResourceSliceMixins
	if s.Spec.Mixins != nil {
		m = *s.Spec.Mixins
	}
	for i := range out.Spec.Devices {
		d := &out.Spec.Devices[i]
		attrs := map[api.QualifiedName]api.DeviceAttribute{}
		caps := map[api.QualifiedName]api.DeviceCapacity{}
		for j, name := range d.Includes {
			found := false
			for _, dm := range m.Device {
				if dm.Name == name {
					for k, v := range dm.Attributes {
						attrs[k] = v
					}
					for k, v := range dm.Capacity {
						caps[k] = v
					}
					found = true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("spec.devices[%d].includes[%d]: no device mixin %q", i, j, name)
			}
		}
		for k, v := range d.Attributes {
			attrs[k] = v
		}
		for k, v := range d.Capacity {
			caps[k] = v
		}
		d.Attributes, d.Capacity, d.Includes = nilIfEmpty(attrs), nilIfEmpty(caps), nil
		for c := range d.ConsumesCounters {
			cc := &d.ConsumesCounters[c]
			counters := map[string]api.Counter{}
			for j, name := range cc.Includes {
				found := false
				for _, cm := range m.DeviceCounterConsumption {
					if cm.Name == name {
						for k, v := range cm.Counters {
							counters[k] = v
						}
						found = true
						break
					}
				}
				if !found {
					return nil, fmt.Errorf("spec.devices[%d].consumesCounters[%d].includes[%d]: no consumption mixin %q", i, c, j, name)
				}
			}
			for k, v := range cc.Counters {
				counters[k] = v
			}
			cc.Counters, cc.Includes = nilIfEmpty(counters), nil
		}
	}
	for i := range out.Spec.SharedCounters {
		cs := &out.Spec.SharedCounters[i]
		counters := map[string]api.Counter{}
		for j, name := range cs.Includes {
			found := false
			for _, sm := range m.CounterSet {
				if sm.Name == name {
					for k, v := range sm.Counters {
						counters[k] = v
					}
					found = true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("spec.sharedCounters[%d].includes[%d]: no counter set mixin %q", i, j, name)
			}
		}
		for k, v := range cs.Counters {
			counters[k] = v
		}
		cs.Counters, cs.Includes = nilIfEmpty(counters), nil
	}
	return out, nil
}

func nilIfEmpty[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	return m
}
