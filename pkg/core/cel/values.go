package cel

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	"github.com/blang/semver/v4"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types/ref"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types/traits"
	"github.com/dractl/dractl/pkg/internal/celgo/interpreter"
	apiservercel "k8s.io/apiserver/pkg/cel"

	"github.com/dractl/dractl/pkg/core/api"
)

// The values in this file are the `device` variable. Upstream builds Go
// maps of every attribute and capacity for each device before evaluating;
// here every look-up goes straight to api.DeviceView, which walks the
// device and then its mixins (KEP-5234: mixins are resolved as part of the
// CEL variable look-up). Nothing is converted that the expression does not
// touch.
//
// Observable behaviour matches upstream's maps:
//   - device.attributes[D] and device.capacity[D] are maps for every
//     domain D, empty when the device has nothing there (so has() on a
//     domain is always true, while `D in device.attributes` is only true
//     when the device has an entry in D);
//   - a name without "/" is in the driver's domain; "D/I" is I in D;
//   - looking up a missing name inside a domain is a "no such key" error.

var (
	_ traits.Mapper          = (*deviceValue)(nil)
	_ interpreter.Activation = (*deviceValue)(nil)
	_ traits.Mapper          = (*domainsValue)(nil)
	_ traits.Mapper          = (*domainValue)(nil)
)

// domainSlots is how many domain maps one evaluation can hand out without
// allocating. Selectors rarely name more than two domains.
const domainSlots = 4

// qualifiedNameMax bounds the stack buffer used to spell "domain/id":
// 63 + 1 + 32 bytes for valid names. Longer keys (which cannot exist on a
// valid device) spill to the heap and still work.
const qualifiedNameMax = 128

// deviceValue is both the activation handed to cel-go and the value of
// the `device` variable, so that an evaluation needs one object. It is
// pooled by the Compiler and reset for every device.
type deviceValue struct {
	adapter  types.Adapter
	driver   string
	view     api.DeviceView
	multi    bool
	attrs    domainsValue
	caps     domainsValue
	slots    [domainSlots]domainValue
	numSlots int
}

// domainsValue is device.attributes (capacity false) or device.capacity.
// Both share the device's memory; only the kind differs.
type domainsValue struct {
	dev      *deviceValue
	capacity bool
}

// domainValue is device.attributes[D] or device.capacity[D].
type domainValue struct {
	dev      *deviceValue
	domain   string
	capacity bool
}

func (d *deviceValue) reset(adapter types.Adapter, in Device) {
	d.adapter = adapter
	d.driver = in.Driver
	d.view = in.View
	d.multi = in.View.Device.AllowMultipleAllocations != nil && *in.View.Device.AllowMultipleAllocations
	d.attrs = domainsValue{dev: d}
	d.caps = domainsValue{dev: d, capacity: true}
	d.numSlots = 0
}

// release drops every reference into the caller's slice before the value
// goes back to the pool.
func (d *deviceValue) release() {
	d.view = api.DeviceView{}
	d.driver = ""
	for i := range d.numSlots {
		d.slots[i] = domainValue{}
	}
	d.numSlots = 0
}

// ResolveName implements interpreter.Activation.
func (d *deviceValue) ResolveName(name string) (any, bool) {
	if name == deviceVar {
		return d, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (d *deviceValue) Parent() interpreter.Activation { return nil }

// domain returns the map of one domain, reusing a slot when possible so
// that the common selector allocates nothing for it.
func (d *deviceValue) domain(name string, capacity bool) *domainValue {
	for i := range d.numSlots {
		if s := &d.slots[i]; s.domain == name && s.capacity == capacity {
			return s
		}
	}
	if d.numSlots < domainSlots {
		s := &d.slots[d.numSlots]
		d.numSlots++
		*s = domainValue{dev: d, domain: name, capacity: capacity}
		return s
	}
	return &domainValue{dev: d, domain: name, capacity: capacity}
}

// splitName is upstream's reading of a qualified name: up to the first
// "/" is the domain, and a name without one is in the driver's domain.
func splitName(name api.QualifiedName, driver string) (domain, id string) {
	if i := strings.IndexByte(string(name), '/'); i >= 0 {
		return string(name[:i]), string(name[i+1:])
	}
	return driver, string(name)
}

// findAttribute and findCapacity look id up in domain, trying the
// driver-domain short spelling first. When a device (wrongly) has both
// spellings, upstream's result depends on map order; the short one wins
// here, deterministically. They are separate functions rather than one
// taking the getter as a func value, because a key passed through a func
// value escapes and would cost an allocation per look-up.
func (d *deviceValue) findAttribute(domain, id string) (api.DeviceAttribute, bool) {
	short, ok := d.shortName(domain, id)
	if ok {
		if a, found := d.view.Attribute(short); found {
			return a, true
		}
	}
	var buf [qualifiedNameMax]byte
	name, ok := qualify(&buf, domain, id)
	if !ok {
		return api.DeviceAttribute{}, false
	}
	return d.view.Attribute(name)
}

func (d *deviceValue) findCapacity(domain, id string) (api.DeviceCapacity, bool) {
	short, ok := d.shortName(domain, id)
	if ok {
		if c, found := d.view.Capacity(short); found {
			return c, true
		}
	}
	var buf [qualifiedNameMax]byte
	name, ok := qualify(&buf, domain, id)
	if !ok {
		return api.DeviceCapacity{}, false
	}
	return d.view.Capacity(name)
}

// shortName is the name id would be stored under without a domain, if
// that spelling can mean domain/id at all.
func (d *deviceValue) shortName(domain, id string) (api.QualifiedName, bool) {
	return api.QualifiedName(id), domain == d.driver && strings.IndexByte(id, '/') < 0
}

// qualify spells domain/id over buf. The result is only used as a map key
// inside DeviceView look-ups, which neither keep nor modify it, so a
// string sharing buf's memory is safe and saves an allocation per
// look-up on the allocator's hot path. It reports false for a domain
// containing "/", which no stored name splits into.
func qualify(buf *[qualifiedNameMax]byte, domain, id string) (api.QualifiedName, bool) {
	if strings.IndexByte(domain, '/') >= 0 {
		return "", false
	}
	b := append(append(append(buf[:0], domain...), '/'), id...)
	return api.QualifiedName(unsafe.String(unsafe.SliceData(b), len(b))), true
}

// inDomain reports whether a stored name belongs to the domain map, and
// under which key; a long spelling shadowed by the short one is skipped
// so each key is seen once.
func (v *domainValue) inDomain(name api.QualifiedName) (string, bool) {
	dom, id := splitName(name, v.dev.driver)
	if dom != v.domain {
		return "", false
	}
	if strings.IndexByte(string(name), '/') >= 0 && dom == v.dev.driver && strings.IndexByte(id, '/') < 0 {
		if v.has(api.QualifiedName(id)) {
			return "", false
		}
	}
	return id, true
}

func (v *domainValue) has(name api.QualifiedName) bool {
	if v.capacity {
		_, ok := v.dev.view.Capacity(name)
		return ok
	}
	_, ok := v.dev.view.Attribute(name)
	return ok
}

// names yields every effective name of the device's attributes or
// capacities once.
func (d *deviceValue) names(capacity bool, yield func(api.QualifiedName) bool) {
	if capacity {
		for n := range d.view.Capacities() {
			if !yield(n) {
				return
			}
		}
		return
	}
	for n := range d.view.Attributes() {
		if !yield(n) {
			return
		}
	}
}

func (v *domainValue) lookup(key ref.Val) (ref.Val, bool) {
	id, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	if v.capacity {
		c, ok := v.dev.findCapacity(v.domain, string(id))
		if !ok {
			return nil, false
		}
		q := c.Value
		return apiservercel.Quantity{Quantity: &q}, true
	}
	a, ok := v.dev.findAttribute(v.domain, string(id))
	if !ok {
		return nil, false
	}
	return attributeValue(v.dev.adapter, v.domain, string(id), a), true
}

// attributeValue converts one attribute the way upstream does, including
// the order in which the value fields are tried.
func attributeValue(adapter types.Adapter, domain, id string, a api.DeviceAttribute) ref.Val {
	switch {
	case a.IntValues != nil:
		return types.NewDynamicList(adapter, a.IntValues)
	case a.BoolValues != nil:
		return types.NewDynamicList(adapter, a.BoolValues)
	case a.StringValues != nil:
		return types.NewStringList(adapter, a.StringValues)
	case a.VersionValues != nil:
		vs := make([]ref.Val, len(a.VersionValues))
		for i, s := range a.VersionValues {
			v, err := semver.Parse(s)
			if err != nil {
				return types.NewErr("attribute %s/%s: versions[%d]: parse semantic version %q: %v", domain, id, i, s, err)
			}
			vs[i] = apiservercel.Semver{Version: v}
		}
		return types.NewRefValList(adapter, vs)
	case a.IntValue != nil:
		return types.Int(*a.IntValue)
	case a.BoolValue != nil:
		return types.Bool(*a.BoolValue)
	case a.StringValue != nil:
		return types.String(*a.StringValue)
	case a.VersionValue != nil:
		v, err := semver.Parse(*a.VersionValue)
		if err != nil {
			return types.NewErr("attribute %s/%s: parse semantic version %q: %v", domain, id, *a.VersionValue, err)
		}
		return apiservercel.Semver{Version: v}
	default:
		return types.NewErr("attribute %s/%s: no value set, expected one of int, bool, string, version, ints, bools, strings, versions", domain, id)
	}
}

// Find implements traits.Mapper.
func (v *domainValue) Find(key ref.Val) (ref.Val, bool) { return v.lookup(key) }

// Get implements traits.Indexer.
func (v *domainValue) Get(key ref.Val) ref.Val {
	if val, ok := v.lookup(key); ok {
		return val
	}
	return types.NewErr("no such key: %v", key)
}

// Contains implements traits.Container.
func (v *domainValue) Contains(key ref.Val) ref.Val {
	_, ok := v.lookup(key)
	return types.Bool(ok)
}

func (v *domainValue) keys() []string {
	var keys []string
	v.dev.names(v.capacity, func(n api.QualifiedName) bool {
		if id, ok := v.inDomain(n); ok {
			keys = append(keys, id)
		}
		return true
	})
	return keys
}

// Size implements traits.Sizer.
func (v *domainValue) Size() ref.Val {
	n := 0
	v.dev.names(v.capacity, func(name api.QualifiedName) bool {
		if _, ok := v.inDomain(name); ok {
			n++
		}
		return true
	})
	return types.Int(n)
}

// IsZeroValue implements traits.Zeroer.
func (v *domainValue) IsZeroValue() bool { return v.Size() == types.IntZero }

// Iterator implements traits.Iterable. The key list is built only when a
// selector iterates; look-ups never build it.
func (v *domainValue) Iterator() traits.Iterator {
	return types.NewStringList(v.dev.adapter, v.keys()).Iterator()
}

func (v *domainValue) materialize() traits.Mapper {
	m := map[ref.Val]ref.Val{}
	for _, k := range v.keys() {
		val, _ := v.lookup(types.String(k))
		m[types.String(k)] = val
	}
	return types.NewRefValMap(v.dev.adapter, m)
}

func (v *domainValue) ConvertToNative(t reflect.Type) (any, error) {
	return v.materialize().ConvertToNative(t)
}
func (v *domainValue) ConvertToType(t ref.Type) ref.Val { return convertMapToType(v, t) }
func (v *domainValue) Equal(other ref.Val) ref.Val      { return mapEqual(v, other) }
func (v *domainValue) Type() ref.Type                   { return types.MapType }
func (v *domainValue) Value() any                       { return v.materialize().Value() }

// domains returns the distinct domains that hold at least one entry.
func (v *domainsValue) domains() []string {
	var out []string
	v.dev.names(v.capacity, func(n api.QualifiedName) bool {
		dom, _ := splitName(n, v.dev.driver)
		for _, seen := range out {
			if seen == dom {
				return true
			}
		}
		out = append(out, dom)
		return true
	})
	return out
}

func (v *domainsValue) hasDomain(domain string) bool {
	found := false
	v.dev.names(v.capacity, func(n api.QualifiedName) bool {
		dom, _ := splitName(n, v.dev.driver)
		found = dom == domain
		return !found
	})
	return found
}

// Find implements traits.Mapper. Every domain is present, as an empty map
// when the device has nothing there, which is how upstream lets selectors
// of one driver run on devices of another without errors.
func (v *domainsValue) Find(key ref.Val) (ref.Val, bool) {
	dom, ok := key.(types.String)
	if !ok {
		return types.NewStringInterfaceMap(v.dev.adapter, nil), true
	}
	return v.dev.domain(string(dom), v.capacity), true
}

// Get implements traits.Indexer. Unlike Find it fails for a domain without
// entries: upstream's default applies to look-ups only, not to Get.
func (v *domainsValue) Get(key ref.Val) ref.Val {
	if v.Contains(key) == types.True {
		val, _ := v.Find(key)
		return val
	}
	return types.NewErr("no such key: %v", key)
}

// Contains implements traits.Container: true only for domains that have
// entries.
func (v *domainsValue) Contains(key ref.Val) ref.Val {
	dom, ok := key.(types.String)
	if !ok {
		return types.False
	}
	return types.Bool(v.hasDomain(string(dom)))
}

// Size implements traits.Sizer.
func (v *domainsValue) Size() ref.Val { return types.Int(len(v.domains())) }

// IsZeroValue implements traits.Zeroer.
func (v *domainsValue) IsZeroValue() bool {
	empty := true
	v.dev.names(v.capacity, func(api.QualifiedName) bool {
		empty = false
		return false
	})
	return empty
}

// Iterator implements traits.Iterable.
func (v *domainsValue) Iterator() traits.Iterator {
	return types.NewStringList(v.dev.adapter, v.domains()).Iterator()
}

func (v *domainsValue) materialize() traits.Mapper {
	m := map[ref.Val]ref.Val{}
	for _, dom := range v.domains() {
		m[types.String(dom)] = v.dev.domain(dom, v.capacity).materialize()
	}
	return types.NewRefValMap(v.dev.adapter, m)
}

func (v *domainsValue) ConvertToNative(t reflect.Type) (any, error) {
	return v.materialize().ConvertToNative(t)
}
func (v *domainsValue) ConvertToType(t ref.Type) ref.Val { return convertMapToType(v, t) }
func (v *domainsValue) Equal(other ref.Val) ref.Val      { return mapEqual(v, other) }
func (v *domainsValue) Type() ref.Type                   { return types.MapType }
func (v *domainsValue) Value() any                       { return v.materialize().Value() }

// The device itself is a map with four keys, as upstream passes it.
var deviceKeys = []string{driverVar, multiAllocVar, attributesVar, capacityVar}

func (d *deviceValue) field(key ref.Val) (ref.Val, bool) {
	name, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	switch string(name) {
	case driverVar:
		return types.String(d.driver), true
	case multiAllocVar:
		return types.Bool(d.multi), true
	case attributesVar:
		return &d.attrs, true
	case capacityVar:
		return &d.caps, true
	}
	return nil, false
}

// Find implements traits.Mapper.
func (d *deviceValue) Find(key ref.Val) (ref.Val, bool) { return d.field(key) }

// Get implements traits.Indexer.
func (d *deviceValue) Get(key ref.Val) ref.Val {
	if v, ok := d.field(key); ok {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

// Contains implements traits.Container.
func (d *deviceValue) Contains(key ref.Val) ref.Val {
	_, ok := d.field(key)
	return types.Bool(ok)
}

// Size implements traits.Sizer.
func (d *deviceValue) Size() ref.Val { return types.Int(len(deviceKeys)) }

// Iterator implements traits.Iterable.
func (d *deviceValue) Iterator() traits.Iterator {
	return types.NewStringList(d.adapter, deviceKeys).Iterator()
}

func (d *deviceValue) materialize() traits.Mapper {
	m := make(map[ref.Val]ref.Val, len(deviceKeys))
	for _, k := range deviceKeys {
		v, _ := d.field(types.String(k))
		if dv, ok := v.(*domainsValue); ok {
			v = dv.materialize()
		}
		m[types.String(k)] = v
	}
	return types.NewRefValMap(d.adapter, m)
}

func (d *deviceValue) ConvertToNative(t reflect.Type) (any, error) {
	return d.materialize().ConvertToNative(t)
}
func (d *deviceValue) ConvertToType(t ref.Type) ref.Val { return convertMapToType(d, t) }
func (d *deviceValue) Equal(other ref.Val) ref.Val      { return mapEqual(d, other) }
func (d *deviceValue) Type() ref.Type                   { return types.MapType }
func (d *deviceValue) Value() any                       { return d.materialize().Value() }

func convertMapToType(m traits.Mapper, t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return m
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.MapType, t)
}

// mapEqual is CEL map equality: same size and equal values under every key.
func mapEqual(m traits.Mapper, other ref.Val) ref.Val {
	o, ok := other.(traits.Mapper)
	if !ok {
		return types.False
	}
	if m.Size().Equal(o.Size()) != types.True {
		return types.False
	}
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		mv, _ := m.Find(k)
		ov, found := o.Find(k)
		if !found {
			return types.False
		}
		if types.Equal(mv, ov) == types.False {
			return types.False
		}
	}
	return types.True
}

// String makes error messages and format() show contents, not pointers.
func (v *domainValue) String() string  { return fmt.Sprint(v.materialize()) }
func (v *domainsValue) String() string { return fmt.Sprint(v.materialize()) }
func (d *deviceValue) String() string  { return fmt.Sprint(d.materialize()) }
