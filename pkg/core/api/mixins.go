package api

import (
	"fmt"
	"iter"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file is the single definition of KEP-5234 mixin semantics
// (KEP-5234 "Proposal"): includes are applied in listed order, a later
// mixin wins over an earlier one, and a field set on the device, counter set
// or counter consumption itself wins over every mixin. A counter
// consumption mixin carries no counter set; it is consumed from the set
// named by the entry that includes it.
//
// Two access paths exist and must always agree: the lazy views below
// (look-ups walk the object, then its includes from last to first, and
// allocate nothing) for the allocator's hot path, and Flatten for tools.

// MixinKind names one of the three mixin lists of spec.mixins.
type MixinKind string

const (
	MixinDevice                   MixinKind = "device"
	MixinDeviceCounterConsumption MixinKind = "deviceCounterConsumption"
	MixinCounterSet               MixinKind = "counterSet"
)

// UnknownMixinError reports an include that names no mixin of its kind in
// the slice. Index is the position in the includes list; Consumption is the
// index in the device's consumesCounters when the include is there, else -1.
type UnknownMixinError struct {
	Kind        MixinKind
	Name        string
	Index       int
	Consumption int
}

// Path is the include's field path below the including object's path.
func (e *UnknownMixinError) Path(object *field.Path) *field.Path {
	if e.Consumption >= 0 {
		object = object.Child("consumesCounters").Index(e.Consumption)
	}
	return object.Child("includes").Index(e.Index)
}

// FieldError is the error as admission reports it below the object's path.
func (e *UnknownMixinError) FieldError(object *field.Path) *field.Error {
	return field.NotFound(e.Path(object), e.Name)
}

func (e *UnknownMixinError) Error() string {
	return fmt.Sprintf("%s: no %s mixin named %q in this ResourceSlice", e.Path(nil), e.Kind, e.Name)
}

// MixinIndex finds a slice's mixins by name. It is built once per slice;
// per-device work never builds maps. When a name is defined twice (which
// validation rejects) the first definition is used.
type MixinIndex struct {
	device      map[string]*DeviceMixin
	consumption map[string]*DeviceCounterConsumptionMixin
	counterSet  map[string]*CounterSetMixin
}

// NewMixinIndex indexes the mixins of spec. The index points into spec, so
// spec must not be modified while the index or views built from it are used.
func NewMixinIndex(spec *ResourceSliceSpec) *MixinIndex {
	ix := &MixinIndex{}
	m := spec.Mixins
	if m == nil {
		return ix
	}
	ix.device = make(map[string]*DeviceMixin, len(m.Device))
	for i := range m.Device {
		if _, dup := ix.device[m.Device[i].Name]; !dup {
			ix.device[m.Device[i].Name] = &m.Device[i]
		}
	}
	ix.consumption = make(map[string]*DeviceCounterConsumptionMixin, len(m.DeviceCounterConsumption))
	for i := range m.DeviceCounterConsumption {
		if _, dup := ix.consumption[m.DeviceCounterConsumption[i].Name]; !dup {
			ix.consumption[m.DeviceCounterConsumption[i].Name] = &m.DeviceCounterConsumption[i]
		}
	}
	ix.counterSet = make(map[string]*CounterSetMixin, len(m.CounterSet))
	for i := range m.CounterSet {
		if _, dup := ix.counterSet[m.CounterSet[i].Name]; !dup {
			ix.counterSet[m.CounterSet[i].Name] = &m.CounterSet[i]
		}
	}
	return ix
}

// DeviceMixin returns the device mixin with that name.
func (ix *MixinIndex) DeviceMixin(name string) (*DeviceMixin, bool) {
	m, ok := ix.device[name]
	return m, ok
}

// ConsumptionMixin returns the device counter consumption mixin with that name.
func (ix *MixinIndex) ConsumptionMixin(name string) (*DeviceCounterConsumptionMixin, bool) {
	m, ok := ix.consumption[name]
	return m, ok
}

// CounterSetMixin returns the counter set mixin with that name.
func (ix *MixinIndex) CounterSetMixin(name string) (*CounterSetMixin, bool) {
	m, ok := ix.counterSet[name]
	return m, ok
}

func resolve[T any](kind MixinKind, names []string, find func(string) (*T, bool)) ([]*T, error) {
	if len(names) == 0 {
		return nil, nil
	}
	out := make([]*T, len(names))
	for i, n := range names {
		m, ok := find(n)
		if !ok {
			return nil, &UnknownMixinError{Kind: kind, Name: n, Index: i, Consumption: -1}
		}
		out[i] = m
	}
	return out, nil
}

// DeviceView is a device whose includes are resolved. It answers what the
// flattened device would answer without building it.
type DeviceView struct {
	Device *Device
	// Mixins are the included device mixins in listed order.
	Mixins []*DeviceMixin
	// Consumptions are the device's counter consumptions, includes resolved.
	Consumptions []ConsumptionView
}

// Device resolves the includes of d and of its counter consumptions. The
// error is an *UnknownMixinError.
func (ix *MixinIndex) Device(d *Device) (DeviceView, error) {
	var cons []ConsumptionView
	if len(d.ConsumesCounters) > 0 {
		cons = make([]ConsumptionView, len(d.ConsumesCounters))
	}
	return ix.deviceView(d, cons)
}

// DeviceViews resolves devices as MixinIndex.Device does, taking their
// consumption views from one allocation made for a whole list of devices:
// a cluster's pools have hundreds of thousands of them.
type DeviceViews struct {
	ix   *MixinIndex
	cons []ConsumptionView
}

// Views returns DeviceViews with room for the devices of devs.
func (ix *MixinIndex) Views(devs []Device) DeviceViews {
	n := 0
	for i := range devs {
		n += len(devs[i].ConsumesCounters)
	}
	return DeviceViews{ix: ix, cons: make([]ConsumptionView, n)}
}

// Device is MixinIndex.Device.
func (dv *DeviceViews) Device(d *Device) (DeviceView, error) {
	k := len(d.ConsumesCounters)
	if len(dv.cons) < k {
		// More devices than Views was given.
		dv.cons = make([]ConsumptionView, k)
	}
	cons := dv.cons[:k:k]
	dv.cons = dv.cons[k:]
	return dv.ix.deviceView(d, cons)
}

// deviceView is Device, with cons (as long as d's consumption list) to hold
// the consumption views.
func (ix *MixinIndex) deviceView(d *Device, cons []ConsumptionView) (DeviceView, error) {
	v := DeviceView{Device: d}
	var err error
	if v.Mixins, err = resolve(MixinDevice, d.Includes, ix.DeviceMixin); err != nil {
		return DeviceView{}, err
	}
	if len(d.ConsumesCounters) > 0 {
		v.Consumptions = cons
		for i := range d.ConsumesCounters {
			if v.Consumptions[i], err = ix.Consumption(&d.ConsumesCounters[i]); err != nil {
				err.(*UnknownMixinError).Consumption = i
				return DeviceView{}, err
			}
		}
	}
	return v, nil
}

// lookup finds key first in own, then in the mixins from last to first.
func lookup[K comparable, V any, M any](own map[K]V, mixins []*M, field func(*M) map[K]V, key K) (V, bool) {
	if v, ok := own[key]; ok {
		return v, true
	}
	for i := len(mixins) - 1; i >= 0; i-- {
		if v, ok := field(mixins[i])[key]; ok {
			return v, true
		}
	}
	var zero V
	return zero, false
}

// merged yields every effective entry exactly once: the object's own, then
// each mixin's from last to first, skipping keys a stronger source set.
func merged[K comparable, V any, M any](own map[K]V, mixins []*M, field func(*M) map[K]V) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, v := range own {
			if !yield(k, v) {
				return
			}
		}
		for i := len(mixins) - 1; i >= 0; i-- {
			for k, v := range field(mixins[i]) {
				if shadowed(own, mixins[i+1:], field, k) {
					continue
				}
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// shadowed reports whether a stronger source than the mixin being read
// (the object itself, or a mixin listed after it) sets key.
func shadowed[K comparable, V any, M any](own map[K]V, later []*M, field func(*M) map[K]V, key K) bool {
	if _, ok := own[key]; ok {
		return true
	}
	for _, m := range later {
		if _, ok := field(m)[key]; ok {
			return true
		}
	}
	return false
}

func countMerged[K comparable, V any, M any](own map[K]V, mixins []*M, field func(*M) map[K]V) int {
	if len(mixins) == 0 {
		return len(own)
	}
	n := 0
	for range merged(own, mixins, field) {
		n++
	}
	return n
}

func deviceMixinAttributes(m *DeviceMixin) map[QualifiedName]DeviceAttribute { return m.Attributes }
func deviceMixinCapacity(m *DeviceMixin) map[QualifiedName]DeviceCapacity    { return m.Capacity }

// Attribute returns the effective attribute with that name.
func (v DeviceView) Attribute(name QualifiedName) (DeviceAttribute, bool) {
	return lookup(v.Device.Attributes, v.Mixins, deviceMixinAttributes, name)
}

// Capacity returns the effective capacity with that name.
func (v DeviceView) Capacity(name QualifiedName) (DeviceCapacity, bool) {
	return lookup(v.Device.Capacity, v.Mixins, deviceMixinCapacity, name)
}

// Attributes yields each effective attribute once, in no particular order.
func (v DeviceView) Attributes() iter.Seq2[QualifiedName, DeviceAttribute] {
	return merged(v.Device.Attributes, v.Mixins, deviceMixinAttributes)
}

// Capacities yields each effective capacity once, in no particular order.
func (v DeviceView) Capacities() iter.Seq2[QualifiedName, DeviceCapacity] {
	return merged(v.Device.Capacity, v.Mixins, deviceMixinCapacity)
}

// NumAttributesAndCapacities counts the entries of the flattened device,
// which is what the 32-entry limit applies to (KEP-5234 "Limits").
func (v DeviceView) NumAttributesAndCapacities() int {
	return countMerged(v.Device.Attributes, v.Mixins, deviceMixinAttributes) +
		countMerged(v.Device.Capacity, v.Mixins, deviceMixinCapacity)
}

// ConsumptionView is a device counter consumption whose includes are resolved.
type ConsumptionView struct {
	Consumption *DeviceCounterConsumption
	Mixins      []*DeviceCounterConsumptionMixin
}

// Consumption resolves the includes of one device counter consumption.
func (ix *MixinIndex) Consumption(c *DeviceCounterConsumption) (ConsumptionView, error) {
	ms, err := resolve(MixinDeviceCounterConsumption, c.Includes, ix.ConsumptionMixin)
	if err != nil {
		return ConsumptionView{}, err
	}
	return ConsumptionView{Consumption: c, Mixins: ms}, nil
}

func consumptionMixinCounters(m *DeviceCounterConsumptionMixin) map[string]Counter { return m.Counters }

// CounterSet is the set the counters are consumed from; it always comes
// from the consumption entry itself.
func (c ConsumptionView) CounterSet() string { return c.Consumption.CounterSet }

// Counter returns the effective amount consumed of one counter.
func (c ConsumptionView) Counter(name string) (Counter, bool) {
	return lookup(c.Consumption.Counters, c.Mixins, consumptionMixinCounters, name)
}

// Counters yields each effective consumed counter once.
func (c ConsumptionView) Counters() iter.Seq2[string, Counter] {
	return merged(c.Consumption.Counters, c.Mixins, consumptionMixinCounters)
}

// NumCounters counts the counters of the flattened consumption.
func (c ConsumptionView) NumCounters() int {
	return countMerged(c.Consumption.Counters, c.Mixins, consumptionMixinCounters)
}

// CounterSetView is a counter set whose includes are resolved.
type CounterSetView struct {
	CounterSet *CounterSet
	Mixins     []*CounterSetMixin
}

// CounterSet resolves the includes of one counter set.
func (ix *MixinIndex) CounterSet(cs *CounterSet) (CounterSetView, error) {
	ms, err := resolve(MixinCounterSet, cs.Includes, ix.CounterSetMixin)
	if err != nil {
		return CounterSetView{}, err
	}
	return CounterSetView{CounterSet: cs, Mixins: ms}, nil
}

func counterSetMixinCounters(m *CounterSetMixin) map[string]Counter { return m.Counters }

// Name is the counter set's name.
func (v CounterSetView) Name() string { return v.CounterSet.Name }

// Counter returns the effective amount available of one counter.
func (v CounterSetView) Counter(name string) (Counter, bool) {
	return lookup(v.CounterSet.Counters, v.Mixins, counterSetMixinCounters, name)
}

// Counters yields each effective counter once.
func (v CounterSetView) Counters() iter.Seq2[string, Counter] {
	return merged(v.CounterSet.Counters, v.Mixins, counterSetMixinCounters)
}

// NumCounters counts the counters of the flattened counter set.
func (v CounterSetView) NumCounters() int {
	return countMerged(v.CounterSet.Counters, v.Mixins, counterSetMixinCounters)
}
