package api

import (
	"iter"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// collect builds a fresh map from an effective-entry sequence, deep-copying
// values with cp. An empty result is nil, like a field never set.
func collect[K comparable, V any](seq iter.Seq2[K, V], cp func(V) V) map[K]V {
	var out map[K]V
	for k, v := range seq {
		if out == nil {
			out = make(map[K]V)
		}
		out[k] = cp(v)
	}
	return out
}

func copyAttribute(a DeviceAttribute) DeviceAttribute { return *a.DeepCopy() }
func copyCapacity(c DeviceCapacity) DeviceCapacity    { return *c.DeepCopy() }
func copyCounter(c Counter) Counter                   { return Counter{Value: c.Value.DeepCopy()} }

// Flatten returns the device as it is with all mixins applied: no includes,
// and every attribute, capacity and consumed counter on the device itself.
// The result shares no memory with the view's device or mixins.
func (v DeviceView) Flatten() Device {
	out := *v.Device.DeepCopy()
	out.Includes = nil
	out.Attributes = collect(v.Attributes(), copyAttribute)
	out.Capacity = collect(v.Capacities(), copyCapacity)
	for i := range out.ConsumesCounters {
		out.ConsumesCounters[i].Includes = nil
		out.ConsumesCounters[i].Counters = collect(v.Consumptions[i].Counters(), copyCounter)
	}
	return out
}

// Flatten returns the counter set with all mixins applied.
func (v CounterSetView) Flatten() CounterSet {
	return CounterSet{Name: v.CounterSet.Name, Counters: collect(v.Counters(), copyCounter)}
}

// Flatten returns a copy of the slice with every include applied and
// spec.mixins removed. It fails when an include names an unknown mixin;
// the error names the device or counter set.
func Flatten(s *ResourceSlice) (*ResourceSlice, error) {
	out := s.DeepCopy()
	out.Spec.Mixins = nil
	ix := NewMixinIndex(&s.Spec)
	for i := range s.Spec.Devices {
		v, err := ix.Device(&s.Spec.Devices[i])
		if err != nil {
			return nil, pathError(field.NewPath("spec", "devices").Index(i), err)
		}
		out.Spec.Devices[i] = v.Flatten()
	}
	for i := range s.Spec.SharedCounters {
		v, err := ix.CounterSet(&s.Spec.SharedCounters[i])
		if err != nil {
			return nil, pathError(field.NewPath("spec", "sharedCounters").Index(i), err)
		}
		out.Spec.SharedCounters[i] = v.Flatten()
	}
	return out, nil
}

// pathError places an unresolved include at its full field path.
func pathError(object *field.Path, err error) error {
	return err.(*UnknownMixinError).FieldError(object)
}
