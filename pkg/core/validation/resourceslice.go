package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/internal/parallel"
	resourcev1 "k8s.io/api/resource/v1"
)

// resourceSlices validates each slice like ResourceSlice, spread over
// GOMAXPROCS workers. The result holds the errors of slices[i] at index i,
// whatever the scheduling.
func resourceSlices(slices []*api.ResourceSlice) []field.ErrorList {
	out := make([]field.ErrorList, len(slices))
	parallel.For(len(slices), func(i int) { out[i] = resourceSlice(slices[i]) })
	return out
}

// resourceSlice validates a ResourceSlice as admission would on create.
//
// A slice that sets no KEP-5234 field is accepted exactly when kube-apiserver
// 1.37 with all DRA feature gates enabled accepts it; seed rules that the
// apiserver does not enforce are left to ResourceSliceWarnings. A slice that uses mixins is validated against
// the slice-wide limits of KEP-5234 (KEP-5234 "Limits") instead of the
// per-object limits they replace.
//
// The result is deterministic: map entries are visited in key order.
func resourceSlice(s *api.ResourceSlice) field.ErrorList {
	if s == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no ResourceSlice given")}
	}
	errs := objectMeta(&s.ObjectMeta, false, field.NewPath("metadata"))
	v := newSliceValidator(&s.Spec, s.UsesMixins())
	v.validate(field.NewPath("spec"))
	return append(errs, v.errs...)
}

// sliceLimits are the limits that differ between plain and mixin slices.
// A zero per-object counter limit means "none": with mixins only the
// slice-wide totals bound counters (KEP-5234 "Limits").
type sliceLimits struct {
	devices                int
	counterSets            int
	taintsPerDevice        int
	consumptionsPerDevice  int
	countersPerCounterSet  int
	countersPerConsumption int
}

func plainLimits(spec *api.ResourceSliceSpec) sliceLimits {
	l := sliceLimits{
		devices:                MaxDevices,
		counterSets:            MaxCounterSets,
		taintsPerDevice:        MaxTaintsPerDevice,
		consumptionsPerDevice:  MaxConsumptionsPerDevice,
		countersPerCounterSet:  MaxCountersPerCounterSet,
		countersPerConsumption: MaxCountersPerConsumption,
	}
	if usesAdvancedFeatures(spec) {
		l.devices = MaxDevicesWithAdvancedFeatures
	}
	return l
}

var mixinLimits = sliceLimits{
	devices:               MixinMaxDevices,
	counterSets:           MixinMaxCounterSets,
	taintsPerDevice:       MixinMaxTaintsPerDevice,
	consumptionsPerDevice: MixinMaxConsumptionsPerDevice,
}

// usesAdvancedFeatures reports taints, counter consumption or list-typed
// attributes on any device, which lower the device limit to 64 (v1 API reference
// .spec.devices; v1 ResourceSliceMaxDevicesWithAdvancedFeatures).
func usesAdvancedFeatures(spec *api.ResourceSliceSpec) bool {
	for i := range spec.Devices {
		d := &spec.Devices[i]
		if len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 {
			return true
		}
		for _, a := range d.Attributes {
			if isListAttribute(&a) {
				return true
			}
		}
	}
	return false
}

func isListAttribute(a *api.DeviceAttribute) bool {
	return a.IntValues != nil || a.BoolValues != nil || a.StringValues != nil || a.VersionValues != nil
}

type sliceValidator struct {
	spec   *api.ResourceSliceSpec
	mixins bool
	ix     *api.MixinIndex
	lim    sliceLimits
	// views holds each device with its device mixins resolved; ok[i] is
	// false when an include of device i did not resolve (already reported),
	// and flattened checks are skipped for it.
	views []api.DeviceView
	ok    []bool
	errs  field.ErrorList
}

func newSliceValidator(spec *api.ResourceSliceSpec, mixins bool) *sliceValidator {
	v := &sliceValidator{spec: spec, mixins: mixins, ix: api.NewMixinIndex(spec)}
	if mixins {
		v.lim = mixinLimits
	} else {
		v.lim = plainLimits(spec)
	}
	return v
}

func (v *sliceValidator) add(errs ...*field.Error) { v.errs = append(v.errs, errs...) }

func (v *sliceValidator) validate(p *field.Path) {
	spec := v.spec
	v.add(driverName(spec.Driver, p.Child("driver"))...)
	v.validatePool(p.Child("pool"))
	v.validateNodeSelection(p)

	if spec.Devices != nil && spec.SharedCounters != nil {
		v.add(field.Invalid(p, "{`devices`, `sharedCounters`}", "only one of `sharedCounters` or `devices` is allowed"))
	}

	if spec.Mixins != nil {
		v.validateMixins(spec.Mixins, p.Child("mixins"))
	}

	devicesPath := p.Child("devices")
	if errs := tooMany(devicesPath, len(spec.Devices), v.lim.devices); errs != nil {
		v.add(errs...)
	} else {
		v.views = make([]api.DeviceView, len(spec.Devices))
		v.ok = make([]bool, len(spec.Devices))
		for i := range spec.Devices {
			// A device's path is built only when it has a problem (see
			// probePath): validateDevice has no effect besides its
			// errors and the view it records, which the second run
			// records again.
			n := len(v.errs)
			v.validateDevice(i, &spec.Devices[i], probePath)
			if len(v.errs) > n {
				v.errs = v.errs[:n]
				v.validateDevice(i, &spec.Devices[i], devicesPath.Index(i))
			}
		}
		v.add(duplicates(spec.Devices, func(d *api.Device) string { return d.Name }, devicesPath)...)
	}

	setsPath := p.Child("sharedCounters")
	if errs := tooMany(setsPath, len(spec.SharedCounters), v.lim.counterSets); errs != nil {
		v.add(errs...)
	} else {
		for i := range spec.SharedCounters {
			v.validateCounterSet(&spec.SharedCounters[i], setsPath.Index(i))
		}
		v.add(duplicates(spec.SharedCounters, func(cs *api.CounterSet) string { return cs.Name }, setsPath)...)
	}

	v.validateTotals(p)

	if spec.PartitionTypeAttribute != nil {
		v.validatePartitionTypeAttribute(p)
	}
	v.add(skipNodeOperations(spec.SkipNodeOperations, p.Child("skipNodeOperations"))...)
}

func (v *sliceValidator) validatePool(p *field.Path) {
	pool := &v.spec.Pool
	v.add(poolName(pool.Name, p.Child("name"))...)
	if pool.Generation < 0 {
		v.add(field.Invalid(p.Child("generation"), pool.Generation, "must be greater than or equal to zero"))
	}
	if pool.ResourceSliceCount <= 0 {
		v.add(field.Invalid(p.Child("resourceSliceCount"), pool.ResourceSliceCount, "must be greater than zero"))
	}
}

const nodeSelectionFields = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"

func (v *sliceValidator) validateNodeSelection(p *field.Path) {
	spec := v.spec
	var set []string
	if spec.NodeName != nil {
		if *spec.NodeName == "" {
			v.add(field.Invalid(p.Child("nodeName"), "", "must be either unset or set to a non-empty string"))
		} else {
			set = append(set, "`nodeName`")
			v.add(nodeName(*spec.NodeName, p.Child("nodeName"))...)
		}
	}
	if spec.NodeSelector != nil {
		set = append(set, "`nodeSelector`")
		v.add(nodeSelector(spec.NodeSelector, true, p.Child("nodeSelector"))...)
	}
	if spec.AllNodes != nil {
		if *spec.AllNodes {
			set = append(set, "`allNodes`")
		} else {
			v.add(field.Invalid(p.Child("allNodes"), false, "must be either unset or set to true"))
		}
	}
	if spec.PerDeviceNodeSelection != nil {
		if *spec.PerDeviceNodeSelection {
			set = append(set, "`perDeviceNodeSelection`")
		} else {
			v.add(field.Invalid(p.Child("perDeviceNodeSelection"), false, "must be either unset or set to true"))
		}
	}
	switch len(set) {
	case 0:
		v.add(field.Required(p, nodeSelectionFields))
	case 1:
	default:
		v.add(field.Invalid(p, "{"+strings.Join(set, ", ")+"}", nodeSelectionFields+", but multiple fields are set"))
	}
}

func (v *sliceValidator) validateDevice(i int, d *api.Device, p *field.Path) {
	if !isDNSLabelFast(d.Name) {
		v.add(dnsLabel(d.Name, p.Child("name"))...)
	}
	allowMulti := d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations

	view := api.DeviceView{Device: d}
	resolved := true
	if len(d.Includes) > 0 {
		view.Mixins, resolved = resolveIncludes(d.Includes, MaxDeviceIncludes, api.MixinDevice, p, v.ix.DeviceMixin, &v.errs)
	}
	v.views[i], v.ok[i] = view, resolved

	// The 32-entry limit applies to the flattened device (KEP-5234,
	// "Limits"); without mixins that is the device itself.
	if resolved {
		if n := view.NumAttributesAndCapacities(); n > MaxAttributesAndCapacitiesPerDevice {
			v.add(field.Invalid(p, n, fmt.Sprintf("the total number of attributes and capacities must not exceed %d", MaxAttributesAndCapacitiesPerDevice)))
		}
		if n := numAttributeValues(view); n > MaxAttributeValuesPerDevice {
			v.add(field.Invalid(p, n, fmt.Sprintf("the total number of attribute values must not exceed %d", MaxAttributeValuesPerDevice)))
		}
	}
	if len(d.Attributes) > 0 && len(attributes(d.Attributes, probePath)) > 0 {
		v.add(attributes(d.Attributes, p.Child("attributes"))...)
	}
	if len(d.Capacity) > 0 && len(capacities(d.Capacity, allowMulti, probePath)) > 0 {
		v.add(capacities(d.Capacity, allowMulti, p.Child("capacity"))...)
	}
	if resolved && !allowMulti && len(view.Mixins) > 0 && mixinsHaveRequestPolicy(view.Mixins) {
		v.add(mixinRequestPolicies(view, p.Child("includes"))...)
	}

	if len(d.Taints) > 0 {
		taintsPath := p.Child("taints")
		if errs := tooMany(taintsPath, len(d.Taints), v.lim.taintsPerDevice); errs != nil {
			v.add(errs...)
		} else {
			for j := range d.Taints {
				v.add(taint(&d.Taints[j], taintsPath.Index(j))...)
			}
		}
	}

	if n := len(d.ConsumesCounters); n > v.lim.consumptionsPerDevice {
		v.add(tooMany(p.Child("consumesCounters"), n, v.lim.consumptionsPerDevice)...)
	} else if n > 0 {
		for j := range d.ConsumesCounters {
			v.validateConsumption(&d.ConsumesCounters[j], p, j)
		}
		if n > 1 {
			v.add(duplicates(d.ConsumesCounters, func(c *api.DeviceCounterConsumption) string { return c.CounterSet }, p.Child("consumesCounters"))...)
		}
	}

	v.validateDeviceNodeSelection(d, p)
	v.add(bindingConditions(d.BindingConditions, d.BindingFailureConditions, p)...)
	if len(d.NodeAllocatableResources) > 0 {
		v.add(nodeAllocatableResources(d.NodeAllocatableResources, view, resolved, p.Child("nodeAllocatableResources"))...)
	}
}

// resolveIncludes checks the includes list of the object at parent: its
// length, and that every name refers to a mixin of the right kind in this
// slice (field.NotFound at includes[j] otherwise). It returns the resolved
// mixins and whether all resolved.
func resolveIncludes[M any](names []string, max int, kind api.MixinKind, parent *field.Path, find func(string) (*M, bool), errs *field.ErrorList) ([]*M, bool) {
	if len(names) > max {
		p := parent.Child("includes")
		*errs = append(*errs, tooMany(p, len(names), max)...)
		return nil, false
	}
	out := make([]*M, len(names))
	ok := true
	for j, name := range names {
		m, found := find(name)
		if !found {
			ok = false
			p := parent.Child("includes")
			if name == "" {
				*errs = append(*errs, field.Required(p.Index(j), "must name a mixin"))
			} else {
				e := field.NotFound(p.Index(j), name)
				e.Detail = fmt.Sprintf("no entry in spec.mixins.%s has this name", kind)
				*errs = append(*errs, e)
			}
			continue
		}
		out[j] = m
	}
	return out, ok
}

// numAttributeValues counts attribute values of the flattened device, each
// item of a list attribute counting once (v1
// ResourceSliceMaxAttributeValuesPerDevice).
func numAttributeValues(view api.DeviceView) int {
	n := 0
	for _, a := range view.Attributes() {
		if l := len(a.BoolValues) + len(a.IntValues) + len(a.StringValues) + len(a.VersionValues); l > 0 {
			n += l
		} else {
			n++
		}
	}
	return n
}

// mixinsHaveRequestPolicy reports whether any capacity of the mixins has a
// request policy: only then can mixinRequestPolicies find anything.
func mixinsHaveRequestPolicy(mixins []*api.DeviceMixin) bool {
	for _, m := range mixins {
		for _, c := range m.Capacity {
			if c.RequestPolicy != nil {
				return true
			}
		}
	}
	return false
}

// mixinRequestPolicies rejects consumable capacity that reaches a device
// through a mixin when the device does not allow multiple allocations: the
// rule of the v1 API reference (requestPolicy needs allowMultipleAllocations) holds for the
// flattened device. The error points at the include that contributes it.
func mixinRequestPolicies(view api.DeviceView, includesPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, m := range view.Mixins {
		for _, name := range sortedKeys(m.Capacity) {
			c := m.Capacity[name]
			if c.RequestPolicy == nil || !effectiveFrom(view, name, j) {
				continue
			}
			errs = append(errs, field.Forbidden(includesPath.Index(j),
				fmt.Sprintf("device mixin %q gives capacity %q a requestPolicy, which requires allowMultipleAllocations to be true on the device", m.Name, name)))
		}
	}
	return errs
}

// effectiveFrom reports whether capacity name of the flattened device comes
// from mixin j (not overridden by the device or a later mixin).
func effectiveFrom(view api.DeviceView, name api.QualifiedName, j int) bool {
	if _, own := view.Device.Capacity[name]; own {
		return false
	}
	for k := j + 1; k < len(view.Mixins); k++ {
		if _, later := view.Mixins[k].Capacity[name]; later {
			return false
		}
	}
	return true
}

func (v *sliceValidator) validateDeviceNodeSelection(d *api.Device, p *field.Path) {
	perDevice := v.spec.PerDeviceNodeSelection != nil && *v.spec.PerDeviceNodeSelection
	if !perDevice {
		// kube-apiserver reports this once per device, not per field.
		if d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil {
			v.add(field.Invalid(p, nil, "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
		}
		return
	}
	const msg = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec"
	var set []string
	if d.NodeName != nil {
		if *d.NodeName == "" {
			v.add(field.Invalid(p.Child("nodeName"), "", "must not be empty"))
		} else {
			set = append(set, "`nodeName`")
			v.add(nodeName(*d.NodeName, p.Child("nodeName"))...)
		}
	}
	if d.NodeSelector != nil {
		set = append(set, "`nodeSelector`")
		// A device's selector may have several terms up to 1.37
		// (ResourceSliceWarnings mentions it); 1.38 asks for one, as of
		// the slice's own, since the allocator merges single terms only.
		v.add(nodeSelector(d.NodeSelector, false, p.Child("nodeSelector"))...)
		if n := len(d.NodeSelector.NodeSelectorTerms); n > 1 {
			v.add(field.Invalid(p.Child("nodeSelector", "nodeSelectorTerms"), fmt.Sprintf("%d terms", n), "must have exactly one node selector term").WithOrigin(originDeviceSelectorTerms))
		}
	}
	if d.AllNodes != nil {
		if *d.AllNodes {
			set = append(set, "`allNodes`")
		} else {
			v.add(field.Invalid(p.Child("allNodes"), false, "must be either unset or set to true"))
		}
	}
	switch len(set) {
	case 0:
		v.add(field.Required(p, msg))
	case 1:
	default:
		v.add(field.Invalid(p, "{"+strings.Join(set, ", ")+"}", msg))
	}
}

// validateConsumption validates consumesCounters[j] of the device at p,
// building the entry's path only when it has a problem.
func (v *sliceValidator) validateConsumption(c *api.DeviceCounterConsumption, p *field.Path, j int) {
	n := len(v.errs)
	v.validateConsumptionAt(c, probePath)
	if len(v.errs) == n {
		return
	}
	v.errs = v.errs[:n]
	v.validateConsumptionAt(c, p.Child("consumesCounters").Index(j))
}

func (v *sliceValidator) validateConsumptionAt(c *api.DeviceCounterConsumption, p *field.Path) {
	if !isDNSLabelFast(c.CounterSet) {
		v.add(dnsLabel(c.CounterSet, p.Child("counterSet"))...)
	}
	view := api.ConsumptionView{Consumption: c}
	resolved := true
	if len(c.Includes) > 0 {
		view.Mixins, resolved = resolveIncludes(c.Includes, MaxConsumptionIncludes, api.MixinDeviceCounterConsumption, p, v.ix.ConsumptionMixin, &v.errs)
	}
	if v.lim.countersPerConsumption > 0 && len(c.Counters) > v.lim.countersPerConsumption {
		v.add(field.TooMany(p.Child("counters"), len(c.Counters), v.lim.countersPerConsumption))
	} else if len(counterNames(c.Counters, probePath)) > 0 {
		v.add(counterNames(c.Counters, p.Child("counters"))...)
	}
	// Counters may come only from mixins; the requirement holds for the
	// flattened consumption (KEP-5234 "API").
	if resolved && view.NumCounters() == 0 {
		v.add(field.Required(p.Child("counters"), requiredCountersDetail(v.mixins)))
	}
	if len(c.CompatibilityGroups) > 0 {
		groupsPath := p.Child("compatibilityGroups")
		if errs := tooMany(groupsPath, len(c.CompatibilityGroups), MaxCompatibilityGroups); errs != nil {
			v.add(errs...)
		} else {
			for k, g := range c.CompatibilityGroups {
				v.add(dnsLabel(g, groupsPath.Index(k))...)
			}
			v.add(stringDuplicates(c.CompatibilityGroups, groupsPath)...)
		}
	}
}

func requiredCountersDetail(mixins bool) string {
	if mixins {
		return "at least one counter must be set here or through included mixins"
	}
	return ""
}

func (v *sliceValidator) validateCounterSet(cs *api.CounterSet, p *field.Path) {
	v.add(dnsLabel(cs.Name, p.Child("name"))...)
	view := api.CounterSetView{CounterSet: cs}
	resolved := true
	if len(cs.Includes) > 0 {
		view.Mixins, resolved = resolveIncludes(cs.Includes, MaxCounterSetIncludes, api.MixinCounterSet, p, v.ix.CounterSetMixin, &v.errs)
	}
	countersPath := p.Child("counters")
	if v.lim.countersPerCounterSet > 0 && len(cs.Counters) > v.lim.countersPerCounterSet {
		v.add(field.TooMany(countersPath, len(cs.Counters), v.lim.countersPerCounterSet))
	} else {
		v.add(counterNames(cs.Counters, countersPath)...)
	}
	if resolved && view.NumCounters() == 0 {
		v.add(field.Required(countersPath, requiredCountersDetail(v.mixins)))
	}
}

// counterNames checks counter names, which must be DNS labels (v1 API reference
// .spec.sharedCounters[].counters). Any parsed quantity is a valid value,
// as in kube-apiserver.
func counterNames(counters map[string]api.Counter, p *field.Path) field.ErrorList {
	return eachEntry(counters, func(name string, _ api.Counter) field.ErrorList {
		if isDNSLabelFast(name) {
			return nil
		}
		return dnsLabel(name, keyPath(p, name, 63))
	})
}

func (v *sliceValidator) validateMixins(m *api.ResourceSliceMixins, p *field.Path) {
	devPath := p.Child("device")
	if errs := tooMany(devPath, len(m.Device), MaxDeviceMixins); errs != nil {
		v.add(errs...)
	} else {
		for i := range m.Device {
			mp := devPath.Index(i)
			v.add(dnsLabel(m.Device[i].Name, mp.Child("name"))...)
			v.add(attributes(m.Device[i].Attributes, mp.Child("attributes"))...)
			// Whether a device may use consumable capacity is decided by
			// each including device; the policy itself is checked here.
			v.add(capacities(m.Device[i].Capacity, true, mp.Child("capacity"))...)
		}
		v.add(duplicates(m.Device, func(x *api.DeviceMixin) string { return x.Name }, devPath)...)
	}

	ccPath := p.Child("deviceCounterConsumption")
	if errs := tooMany(ccPath, len(m.DeviceCounterConsumption), MaxConsumptionMixins); errs != nil {
		v.add(errs...)
	} else {
		for i := range m.DeviceCounterConsumption {
			v.add(counterMixin(m.DeviceCounterConsumption[i].Name, m.DeviceCounterConsumption[i].Counters, ccPath.Index(i))...)
		}
		v.add(duplicates(m.DeviceCounterConsumption, func(x *api.DeviceCounterConsumptionMixin) string { return x.Name }, ccPath)...)
	}

	csPath := p.Child("counterSet")
	if errs := tooMany(csPath, len(m.CounterSet), MaxCounterSetMixins); errs != nil {
		v.add(errs...)
	} else {
		for i := range m.CounterSet {
			v.add(counterMixin(m.CounterSet[i].Name, m.CounterSet[i].Counters, csPath.Index(i))...)
		}
		v.add(duplicates(m.CounterSet, func(x *api.CounterSetMixin) string { return x.Name }, csPath)...)
	}
}

// counterMixin: counters are +required on both counter mixin kinds (KEP-5234
// "API").
func counterMixin(name string, counters map[string]api.Counter, p *field.Path) field.ErrorList {
	errs := dnsLabel(name, p.Child("name"))
	if len(counters) == 0 {
		return append(errs, field.Required(p.Child("counters"), ""))
	}
	return append(errs, counterNames(counters, p.Child("counters"))...)
}

// validateTotals enforces the slice-wide limits. Entries are counted where
// they are defined, not per flattened object: the totals exist to bound
// the size of the stored object (KEP-5234 "Limits").
func (v *sliceValidator) validateTotals(p *field.Path) {
	if !v.mixins {
		// kube-apiserver 1.37 has no slice-wide limits for plain slices;
		// ResourceSliceWarnings reports the 2048 consumed counters of
		// KEP-4815 and KEP-5234.
		return
	}
	spec := v.spec
	consumed := 0
	attrs := 0
	for i := range spec.Devices {
		d := &spec.Devices[i]
		attrs += len(d.Attributes) + len(d.Capacity)
		for j := range d.ConsumesCounters {
			consumed += len(d.ConsumesCounters[j].Counters)
		}
	}
	counters := 0
	for i := range spec.SharedCounters {
		counters += len(spec.SharedCounters[i].Counters)
	}
	if m := spec.Mixins; m != nil {
		for i := range m.Device {
			attrs += len(m.Device[i].Attributes) + len(m.Device[i].Capacity)
		}
		for i := range m.DeviceCounterConsumption {
			consumed += len(m.DeviceCounterConsumption[i].Counters)
		}
		for i := range m.CounterSet {
			counters += len(m.CounterSet[i].Counters)
		}
	}
	if attrs > MixinMaxAttributesAndCapacitiesPerSlice {
		v.add(field.Invalid(p, attrs, fmt.Sprintf("the total number of attributes and capacities across devices and device mixins must not exceed %d", MixinMaxAttributesAndCapacitiesPerSlice)))
	}
	if counters > MixinMaxCountersPerSlice {
		v.add(field.Invalid(p, counters, fmt.Sprintf("the total number of counters across counter sets and counter set mixins must not exceed %d", MixinMaxCountersPerSlice)))
	}
	if consumed > MixinMaxConsumedCountersPerSlice {
		v.add(field.Invalid(p, consumed, fmt.Sprintf("the total number of consumed counters across device counter consumptions and their mixins must not exceed %d", MixinMaxConsumedCountersPerSlice)))
	}
}

// validatePartitionTypeAttribute follows kube-apiserver: the slice must have
// devices that consume counters, and each of them must carry the named
// attribute as a string, possibly under its bare name when the domain is
// the driver's. With mixins the flattened device counts.
func (v *sliceValidator) validatePartitionTypeAttribute(p *field.Path) {
	ptaPath := p.Child("partitionTypeAttribute")
	name := string(*v.spec.PartitionTypeAttribute)
	consumes := false
	for i := range v.spec.Devices {
		if len(v.spec.Devices[i].ConsumesCounters) > 0 {
			consumes = true
			break
		}
	}
	if !consumes {
		v.add(field.Invalid(ptaPath, name, "may only be set on a slice which declares devices that consume counters"))
		return
	}
	if errs := fullyQualifiedName(name, ptaPath); len(errs) > 0 {
		v.add(errs...)
		return
	}
	if v.views == nil {
		return // too many devices, already reported
	}
	bare, _ := strings.CutPrefix(name, v.spec.Driver+"/")
	for i := range v.spec.Devices {
		if len(v.spec.Devices[i].ConsumesCounters) == 0 || !v.ok[i] {
			continue
		}
		attrPath := p.Child("devices").Index(i).Child("attributes").Key(name)
		a, found := v.views[i].Attribute(api.QualifiedName(name))
		if !found && bare != name {
			a, found = v.views[i].Attribute(api.QualifiedName(bare))
		}
		switch {
		case !found:
			v.add(field.Required(attrPath, "device consumes counters and `partitionTypeAttribute` names this attribute, so it must be set"))
		case a.StringValue == nil:
			v.add(field.Invalid(attrPath, a, "must be a string value because `partitionTypeAttribute` names this attribute"))
		}
	}
}

var skipNodeOperationValues = []resourcev1.SkipNodeOperation{
	resourcev1.SkipNodeOperationNodePrepareResources,
	resourcev1.SkipNodeOperationNodeUnprepareResources,
	resourcev1.SkipNodeOperationAll,
}

func skipNodeOperations(ops []resourcev1.SkipNodeOperation, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	has := map[resourcev1.SkipNodeOperation]bool{}
	for i, op := range ops {
		switch op {
		case resourcev1.SkipNodeOperationNodePrepareResources, resourcev1.SkipNodeOperationNodeUnprepareResources, resourcev1.SkipNodeOperationAll:
		default:
			errs = append(errs, field.NotSupported(p.Index(i), op, skipNodeOperationValues))
		}
		if has[op] {
			errs = append(errs, field.Duplicate(p.Index(i), op))
		}
		has[op] = true
	}
	if has[resourcev1.SkipNodeOperationNodePrepareResources] &&
		!has[resourcev1.SkipNodeOperationNodeUnprepareResources] && !has[resourcev1.SkipNodeOperationAll] {
		errs = append(errs, field.Invalid(p, ops, "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped"))
	}
	return errs
}
