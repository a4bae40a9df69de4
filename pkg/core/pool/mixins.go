package pool

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/core/api"
)

// Resolve returns the pool as an allocator may use it: without the
// devices and counter sets it cannot read completely. Nothing is dropped
// from a pool whose slices use no KEP-5234 field, and p itself is
// returned then; otherwise the result shares every untouched slice with p
// and lists what it left out in Dropped.
//
// With mixins enabled, a device or counter set whose includes name no
// mixin of its slice is left out. Admission rejects such slices, and
// mixins are resolved lazily, device by device (KEP-5234
// "Implementation"), so an include that cannot be resolved costs its own
// device and not the pool.
//
// With mixins disabled, every device and counter set that includes a
// mixin is left out (KEP-5234 "Implementation", "Version Skew Strategy"):
// allocating from a device read without its mixins would decide on
// incomplete data.
//
// In both cases a device that consumes from a counter set left out is left
// out too, in every slice of the generation, since what it takes from the
// set can no longer be accounted for.
func (p *Pool) Resolve(mixins bool) *Pool {
	if !anyUsesMixins(p.Slices) && !anyUsesMixins(p.Older) {
		return p
	}
	q := *p
	q.Dropped = nil
	q.Slices, q.Dropped = resolveGeneration(p.Slices, mixins, q.Dropped)
	if len(p.Older) > 0 {
		q.Older = make([]*Slice, 0, len(p.Older))
		for i := 0; i < len(p.Older); {
			j := i
			for j < len(p.Older) && p.Older[j].Spec.Pool.Generation == p.Older[i].Spec.Pool.Generation {
				j++
			}
			var gen []*Slice
			gen, q.Dropped = resolveGeneration(p.Older[i:j], mixins, q.Dropped)
			q.Older = append(q.Older, gen...)
			i = j
		}
	}
	if len(q.Dropped) == 0 {
		return p
	}
	return &q
}

func anyUsesMixins(slices []*Slice) bool {
	for _, s := range slices {
		if s.usesMixins {
			return true
		}
	}
	return false
}

// resolveGeneration drops what Resolve drops from the slices of one
// generation, appending the reasons to dropped. Slices that lose nothing
// are returned as they are.
func resolveGeneration(in []*Slice, mixins bool, dropped []Problem) ([]*Slice, []Problem) {
	// Counter sets first: their consumers may live in any slice of the
	// generation.
	var goneSets map[string]bool
	keepSets := make([][]bool, len(in))
	for k, s := range in {
		for i := range s.Spec.SharedCounters {
			cs := &s.Spec.SharedCounters[i]
			err := counterSetReason(s, cs, field.NewPath("spec", "sharedCounters").Index(i), mixins)
			if err == nil {
				continue
			}
			if keepSets[k] == nil {
				keepSets[k] = make([]bool, len(s.Spec.SharedCounters))
				for x := range keepSets[k] {
					keepSets[k][x] = true
				}
			}
			keepSets[k][i] = false
			if goneSets == nil {
				goneSets = map[string]bool{}
			}
			goneSets[cs.Name] = true
			dropped = append(dropped, Problem{Slice: s.Name, Err: err})
		}
	}
	out := make([]*Slice, len(in))
	for k, s := range in {
		var keepDevs []bool
		for i := range s.Spec.Devices {
			err := deviceReason(s, &s.Spec.Devices[i], field.NewPath("spec", "devices").Index(i), mixins, goneSets)
			if err == nil {
				continue
			}
			if keepDevs == nil {
				keepDevs = make([]bool, len(s.Spec.Devices))
				for x := range keepDevs {
					keepDevs[x] = true
				}
			}
			keepDevs[i] = false
			dropped = append(dropped, Problem{Slice: s.Name, Err: err})
		}
		out[k] = s
		if keepSets[k] == nil && keepDevs == nil {
			continue
		}
		// A shallow copy: the kept devices and counter sets, and the
		// mixins they read, are shared with the original slice, which
		// no one modifies.
		obj := *s.ResourceSlice
		obj.Spec.SharedCounters = keep(s.Spec.SharedCounters, keepSets[k])
		obj.Spec.Devices = keep(s.Spec.Devices, keepDevs)
		out[k] = &Slice{ResourceSlice: &obj, Mixins: s.Mixins, usesMixins: s.usesMixins, Unread: s.Unread}
	}
	return out, dropped
}

func keep[T any](in []T, keep []bool) []T {
	if keep == nil {
		return in
	}
	var out []T
	for i := range in {
		if keep[i] {
			out = append(out, in[i])
		}
	}
	return out
}

const gateOff = "DRAResourceSliceMixins is disabled"

// counterSetReason says why a counter set is left out, or nil.
func counterSetReason(s *Slice, cs *api.CounterSet, path *field.Path, mixins bool) *field.Error {
	if len(cs.Includes) == 0 {
		return nil
	}
	if !mixins {
		return field.Forbidden(path.Child("includes"), gateOff+": the counter set includes mixins, so it and every device consuming it are left out")
	}
	if _, err := s.Mixins.CounterSet(cs); err != nil {
		e := err.(*api.UnknownMixinError).FieldError(path)
		e.Detail = "no such counter set mixin in this ResourceSlice: the counter set and every device consuming it are left out"
		return e
	}
	return nil
}

// deviceReason says why a device is left out, or nil.
func deviceReason(s *Slice, d *api.Device, path *field.Path, mixins bool, goneSets map[string]bool) *field.Error {
	if s.usesMixins {
		if !mixins {
			if len(d.Includes) > 0 {
				return field.Forbidden(path.Child("includes"), gateOff+": the device includes mixins, so it is left out")
			}
			for j := range d.ConsumesCounters {
				if len(d.ConsumesCounters[j].Includes) > 0 {
					return field.Forbidden(path.Child("consumesCounters").Index(j).Child("includes"), gateOff+": the device's counter consumption includes mixins, so the device is left out")
				}
			}
		} else if _, err := s.Mixins.Device(d); err != nil {
			e := err.(*api.UnknownMixinError).FieldError(path)
			e.Detail = fmt.Sprintf("no such %s mixin in this ResourceSlice: the device is left out", err.(*api.UnknownMixinError).Kind)
			return e
		}
	}
	for j := range d.ConsumesCounters {
		if set := d.ConsumesCounters[j].CounterSet; goneSets[set] {
			return field.Invalid(path.Child("consumesCounters").Index(j).Child("counterSet"), set,
				"the counter set was left out of the pool, so the device is left out too")
		}
	}
	return nil
}
