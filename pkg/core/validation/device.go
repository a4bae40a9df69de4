package validation

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/core/api"
)

// semverRe is semver.org 2.0.0 (v1 API reference: attributes{}.version).
var semverRe = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
	`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)

// validVersions remembers versions that semverRe accepted: the devices
// of a cluster repeat a handful of versions (driver, CUDA), and matching
// the expression costs far more than a lookup. It holds at most
// maxValidVersions strings, each no longer than an attribute value may be.
var (
	validVersions    sync.Map // string → struct{}
	numValidVersions atomic.Int32
)

const maxValidVersions = 1024

// isSemver reports whether s matches semverRe.
func isSemver(s string) bool {
	if _, ok := validVersions.Load(s); ok {
		return true
	}
	if !semverRe.MatchString(s) {
		return false
	}
	if len(s) <= AttributeValueMaxLength && numValidVersions.Add(1) <= maxValidVersions {
		validVersions.Store(strings.Clone(s), struct{}{})
	}
	return true
}

// attributes validates names and values of a device's or device mixin's
// attributes. Name errors are reported at the entry (attributes[name]).
func attributes(attrs map[api.QualifiedName]api.DeviceAttribute, p *field.Path) field.ErrorList {
	return eachEntry(attrs, func(name api.QualifiedName, a api.DeviceAttribute) field.ErrorList {
		// Valid entries (nearly all) build no path.
		if len(qualifiedName(string(name), probePath)) == 0 && len(attribute(&a, probePath)) == 0 {
			return nil
		}
		kp := keyPath(p, string(name), qualifiedKeyMaxPathLength)
		return append(qualifiedName(string(name), kp), attribute(&a, kp)...)
	})
}

// attribute: exactly one value field; string and version values at most 64
// characters; versions are semver; list values non-empty (v1 API reference
// attributes{}; v1 DeviceAttribute).
func attribute(a *api.DeviceAttribute, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := 0
	if a.BoolValue != nil {
		set++
	}
	if a.IntValue != nil {
		set++
	}
	if a.StringValue != nil {
		set++
		if len(*a.StringValue) > AttributeValueMaxLength {
			errs = append(errs, stringValue(*a.StringValue, p.Child("string"))...)
		}
	}
	if a.VersionValue != nil {
		set++
		if len(versionValue(*a.VersionValue, probePath)) > 0 {
			errs = append(errs, versionValue(*a.VersionValue, p.Child("version"))...)
		}
	}
	nonEmpty := func(n int, name string) {
		set++
		if n == 0 {
			errs = append(errs, field.Invalid(p.Child(name), "[]", "must not be empty if specified"))
		}
	}
	if a.BoolValues != nil {
		nonEmpty(len(a.BoolValues), "bools")
	}
	if a.IntValues != nil {
		nonEmpty(len(a.IntValues), "ints")
	}
	if a.StringValues != nil {
		nonEmpty(len(a.StringValues), "strings")
		for i, s := range a.StringValues {
			errs = append(errs, stringValue(s, p.Child("strings").Index(i))...)
		}
	}
	if a.VersionValues != nil {
		nonEmpty(len(a.VersionValues), "versions")
		for i, s := range a.VersionValues {
			errs = append(errs, versionValue(s, p.Child("versions").Index(i))...)
		}
	}
	switch set {
	case 0:
		errs = append(errs, field.Invalid(p, "", "exactly one value must be specified"))
	case 1:
	default:
		errs = append(errs, field.Invalid(p, fmt.Sprintf("%d values", set), "exactly one value must be specified"))
	}
	return errs
}

func stringValue(s string, p *field.Path) field.ErrorList {
	if len(s) > AttributeValueMaxLength {
		return field.ErrorList{field.TooLong(p, s, AttributeValueMaxLength)}
	}
	return nil
}

// semver138Re is semverRe with kube-apiserver 1.38's bound: numbers of
// the version and of digit-only pre-release identifiers have at most 18
// digits, so that they fit an int64 once CEL reads them.
var semver138Re = regexp.MustCompile(`^(0|[1-9]\d{0,17})\.(0|[1-9]\d{0,17})\.(0|[1-9]\d{0,17})` +
	`(-(0|[1-9]\d{0,17}|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d{0,17}|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
	`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)

const (
	semverDetail137 = "must be a string compatible with semver.org spec 2.0.0"
	semverDetail138 = "must be a string compatible with semver.org spec 2.0.0, with at most 18 digits in numbers"
)

// versionValue gives each kube-apiserver minor's verdict and words on a
// version attribute (versions.go picks one).
func versionValue(s string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case !isSemver(s):
		errs = append(errs, field.Invalid(p, s, semverDetail137).WithOrigin(originSemverWords137),
			field.Invalid(p, s, semverDetail138).WithOrigin(originSemverWords138))
	case hasLongNumber(s) && !semver138Re.MatchString(s):
		errs = append(errs, field.Invalid(p, s, semverDetail138).WithOrigin(originSemverDigits))
	}
	return append(errs, stringValue(s, p)...)
}

// hasLongNumber reports a run of more than 18 digits, without which a
// version semverRe accepts is one semver138Re accepts too.
func hasLongNumber(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			if run++; run > 18 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// capacities validates names and request policies. A request policy makes
// capacity consumable and is only allowed when the device allows multiple
// allocations (v1 DeviceCapacity.RequestPolicy).
func capacities(caps map[api.QualifiedName]api.DeviceCapacity, allowMulti bool, p *field.Path) field.ErrorList {
	return eachEntry(caps, func(name api.QualifiedName, c api.DeviceCapacity) field.ErrorList {
		if c.RequestPolicy == nil && len(qualifiedName(string(name), probePath)) == 0 {
			return nil // valid, and no path built
		}
		kp := keyPath(p, string(name), qualifiedKeyMaxPathLength)
		errs := qualifiedName(string(name), kp)
		switch {
		case c.RequestPolicy == nil:
		case !allowMulti:
			errs = append(errs, field.Forbidden(kp.Child("requestPolicy"), "allowMultipleAllocations must be true"))
		default:
			errs = append(errs, requestPolicy(c.Value, c.RequestPolicy, kp.Child("requestPolicy"))...)
		}
		return errs
	})
}

// requestPolicy follows kube-apiserver 1.37 with DRAFractionalCapacityRange
// enabled: at most one of validValues and validRange; either one needs
// default; validValues at most 10, ascending, unique, within the capacity
// and containing default; validRange see validRange.
func requestPolicy(capacity resource.Quantity, pol *resourcev1.CapacityRequestPolicy, p *field.Path) field.ErrorList {
	if len(pol.ValidValues) > 0 && pol.ValidRange != nil {
		return field.ErrorList{field.Forbidden(p, `exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time`)}
	}
	switch {
	case len(pol.ValidValues) > 0:
		if pol.Default == nil {
			return field.ErrorList{field.Required(p.Child("default"), "required when validValues is defined")}
		}
		return validValues(*pol.Default, capacity, pol.ValidValues, p.Child("validValues"))
	case pol.ValidRange != nil:
		if pol.Default == nil {
			return field.ErrorList{field.Required(p.Child("default"), "required when validRange is defined")}
		}
		return validRange(*pol.Default, capacity, pol.ValidRange, p.Child("validRange"))
	}
	return nil
}

// validValuesKey is how kube-apiserver decides that two valid values are
// duplicates: by their decimal form, so 1 and 1000m are distinct entries
// (validValuesWarnings reports those).
func validValuesKey(v resource.Quantity) string { return v.AsDec().String() }

func validValues(def, capacity resource.Quantity, values []resource.Quantity, p *field.Path) field.ErrorList {
	if len(values) > MaxCapacityRequestPolicyValidValues {
		return field.ErrorList{field.TooMany(p, len(values), MaxCapacityRequestPolicyValidValues)}
	}
	var errs field.ErrorList
	foundDefault := false
	seen := make(map[string]bool, len(values))
	for i := range values {
		if i > 0 && values[i-1].Cmp(values[i]) > 0 {
			errs = append(errs, field.Invalid(p.Index(i), values[i].String(), "values must be sorted in ascending order"))
		}
		if k := validValuesKey(values[i]); seen[k] {
			errs = append(errs, field.Duplicate(p.Index(i), values[i].String()))
		} else {
			seen[k] = true
		}
		if values[i].Cmp(capacity) > 0 {
			errs = append(errs, field.Invalid(p.Index(i), values[i].String(), "option is larger than capacity value: "+capacity.String()))
		}
		if values[i].Cmp(def) == 0 {
			foundDefault = true
		}
	}
	if !foundDefault {
		errs = append(errs, field.Invalid(p, def.String(), "default value is not valid according to the requestPolicy"))
	}
	return errs
}

// boundOverInt64Detail is the apiserver's complaint about a bound that an
// integer step check cannot represent.
const negativeDetail = apivalidation.IsNegativeErrorMsg

const boundOverInt64Detail = "must not be larger than 9223372036854775807"

// validRange implements kube-apiserver's range rules, including where it
// reports them: default problems are reported under validRange (p), and
// step-grid problems of default and max at validRange.step. Bounds: min in
// [.., capacity], max in [min, capacity], default in [min, max]; a step is
// positive and min+step fits the capacity. Default and max must lie on the
// step grid from min. When any of min, max, step or default is fractional,
// the grid is checked in milli units and each of them must be exactly a
// milli value; otherwise in whole units and each must lie in [0, MaxInt64]
// (the only place where a negative min is rejected).
func validRange(def, capacity resource.Quantity, r *resourcev1.CapacityRequestPolicyRange, p *field.Path) field.ErrorList {
	if r.Min == nil {
		return field.ErrorList{field.Required(p.Child("min"), "required when validRange is defined")}
	}
	var errs field.ErrorList
	lo := *r.Min
	if lo.Cmp(capacity) > 0 {
		errs = append(errs, field.Invalid(p.Child("min"), lo.String(), "min is larger than capacity value: "+capacity.String()))
	}
	if def.Cmp(lo) < 0 {
		errs = append(errs, field.Invalid(p.Child("default"), def.String(), "default is less than min: "+lo.String()))
	}
	if r.Max != nil {
		if lo.Cmp(*r.Max) > 0 {
			errs = append(errs, field.Invalid(p.Child("max"), lo.String(), "min is larger than max: "+r.Max.String()))
		}
		if r.Max.Cmp(capacity) > 0 {
			errs = append(errs, field.Invalid(p.Child("max"), r.Max.String(), "max is larger than capacity value: "+capacity.String()))
		}
		if def.Cmp(*r.Max) > 0 {
			errs = append(errs, field.Invalid(p.Child("default"), def.String(), "default is more than max: "+r.Max.String()))
		}
	}
	bounds := rangeBounds(def, r)
	milli := false
	for _, b := range bounds {
		if isFractional(*b.q) {
			milli = true
		}
	}
	if milli {
		unsafe := false
		for _, b := range bounds {
			if !isMilliValue(*b.q) {
				errs = append(errs, field.Invalid(p.Child(b.name), b.q.String(), "value cannot be represented as a milli value"))
				unsafe = true
			}
		}
		if unsafe {
			return errs
		}
	}
	if r.Step == nil {
		return errs
	}
	step := *r.Step
	if step.Sign() <= 0 {
		return append(errs, field.Invalid(p.Child("step"), step.String(), "must be greater than zero"))
	}
	sum := lo.DeepCopy()
	sum.Add(step)
	if sum.Cmp(capacity) > 0 {
		errs = append(errs, field.Invalid(p.Child("step"), step.String(), fmt.Sprintf("one step %s is larger than capacity value: %s", sum.String(), capacity.String())))
	}
	if !milli {
		unsafe := false
		for _, b := range bounds {
			switch {
			case b.q.Sign() < 0:
				errs = append(errs, field.Invalid(p.Child(b.name), b.q.String(), negativeDetail))
				unsafe = true
			case b.q.CmpInt64(math.MaxInt64) > 0:
				errs = append(errs, field.Invalid(p.Child(b.name), b.q.String(), boundOverInt64Detail))
				unsafe = true
			}
		}
		if unsafe {
			return errs
		}
	}
	if !onStepGrid(def, lo, step, milli) {
		errs = append(errs, field.Invalid(p.Child("step"), def.String(), stepDetail(step, lo)))
	}
	if r.Max != nil && !onStepGrid(*r.Max, lo, step, milli) {
		errs = append(errs, field.Invalid(p.Child("step"), r.Max.String(), stepDetail(step, lo)))
	}
	return errs
}

type namedBound struct {
	name string
	q    *resource.Quantity
}

// rangeBounds lists the set quantities of a range in the order in which
// kube-apiserver reports them.
func rangeBounds(def resource.Quantity, r *resourcev1.CapacityRequestPolicyRange) []namedBound {
	out := []namedBound{{"default", &def}, {"min", r.Min}}
	if r.Max != nil {
		out = append(out, namedBound{"max", r.Max})
	}
	if r.Step != nil {
		out = append(out, namedBound{"step", r.Step})
	}
	return out
}

// isFractional reports a quantity with a part below one.
func isFractional(q resource.Quantity) bool {
	d := q.AsDec()
	if d.Scale() <= 0 {
		return false
	}
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)
	return new(big.Int).Rem(d.UnscaledBig(), unit).Sign() != 0
}

// isMilliValue reports whether q survives a round trip through its milli
// value: false for sub-milli precision and for values whose milli value
// overflows int64.
func isMilliValue(q resource.Quantity) bool {
	return q.Cmp(*resource.NewMilliQuantity(q.MilliValue(), q.Format)) == 0
}

// onStepGrid reports whether value = min + n*step for an integer n. The
// caller has made sure that all three fit int64 in the chosen unit.
func onStepGrid(value, lo, step resource.Quantity, milli bool) bool {
	if milli {
		return (value.MilliValue()-lo.MilliValue())%step.MilliValue() == 0
	}
	return (value.Value()-lo.Value())%step.Value() == 0
}

func stepDetail(step, lo resource.Quantity) string {
	return fmt.Sprintf("value is not a multiple of a given step (%s) from (%s)", step.String(), lo.String())
}

var taintEffects = []resourcev1.DeviceTaintEffect{
	resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNone,
}

// taint: key a label name, value a label value, effect one of None,
// NoSchedule, NoExecute (v1 API reference: .spec.devices[].taints[]).
func taint(t *api.DeviceTaint, p *field.Path) field.ErrorList {
	errs := labelName(t.Key, p.Child("key"))
	if t.Value != "" {
		errs = append(errs, labelValue(t.Value, p.Child("value"))...)
	}
	errs = append(errs, taintEffect(t.Effect, true, p.Child("effect"))...)
	return errs
}

func taintEffect(e resourcev1.DeviceTaintEffect, required bool, p *field.Path) field.ErrorList {
	switch e {
	case "":
		if required {
			return field.ErrorList{field.Required(p, "")}
		}
	case resourcev1.DeviceTaintEffectNone, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute:
	default:
		return field.ErrorList{field.NotSupported(p, e, taintEffects)}
	}
	return nil
}

// bindingConditions follows kube-apiserver: at most 4 of each, each a
// valid condition type (a qualified name), unique, the two lists disjoint,
// and either both set or neither.
func bindingConditions(conds, failures []string, p *field.Path) field.ErrorList {
	if len(conds) == 0 && len(failures) == 0 {
		return nil // nearly every device: no paths built
	}
	var errs field.ErrorList
	condPath, failPath := p.Child("bindingConditions"), p.Child("bindingFailureConditions")
	if e := tooMany(condPath, len(conds), MaxBindingConditions); e != nil {
		errs = append(errs, e...)
	} else {
		for i, c := range conds {
			errs = append(errs, labelName(c, condPath.Index(i))...)
		}
		errs = append(errs, stringDuplicates(conds, condPath)...)
	}
	if e := tooMany(failPath, len(failures), MaxBindingFailureConditions); e != nil {
		errs = append(errs, e...)
	} else {
		for i, c := range failures {
			errs = append(errs, labelName(c, failPath.Index(i))...)
		}
		errs = append(errs, stringDuplicates(failures, failPath)...)
		for i, c := range failures {
			for _, b := range conds {
				if b == c {
					errs = append(errs, field.Invalid(failPath.Index(i), c, "bindingFailureConditions must not overlap with bindingConditions"))
					break
				}
			}
		}
	}
	if len(conds) == 0 && len(failures) > 0 {
		errs = append(errs, field.Invalid(condPath, conds, "bindingConditions are required to use bindingFailureConditions"))
	}
	if len(failures) == 0 && len(conds) > 0 {
		errs = append(errs, field.Invalid(failPath, failures, "bindingFailureConditions are required to use bindingConditions"))
	}
	return errs
}

// isNodeAllocatableResourceName accepts the standard node allocatable
// resources that are not extended resources: cpu, memory,
// ephemeral-storage and hugepages-<size> (v1 Device.NodeAllocatableResources).
func isNodeAllocatableResourceName(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	size, ok := strings.CutPrefix(string(name), corev1.ResourceHugePagesPrefix)
	if !ok {
		return false
	}
	_, err := resource.ParseQuantity(size)
	return err == nil
}

func nodeAllocatableResources(m map[corev1.ResourceName]resourcev1.NodeAllocatableResource, view api.DeviceView, resolved bool, p *field.Path) field.ErrorList {
	return eachEntry(m, func(name corev1.ResourceName, r resourcev1.NodeAllocatableResource) field.ErrorList {
		var errs field.ErrorList
		kp := keyPath(p, string(name), qualifiedKeyMaxPathLength)
		if !isNodeAllocatableResourceName(name) {
			errs = append(errs, field.Invalid(kp, name, "must be a node allocatable resource name (cpu, memory, ephemeral-storage or hugepages-<size>)"))
		}
		if r.Mapping == nil && r.Overhead == nil {
			errs = append(errs, field.Required(kp, "at least one of mapping or overhead must be set"))
		}
		if r.Mapping != nil {
			errs = append(errs, nodeAllocatableMapping(r.Mapping, view, resolved, kp.Child("mapping"))...)
		}
		if o := r.Overhead; o != nil {
			op := kp.Child("overhead")
			if o.PerPod == nil && o.PerContainer == nil {
				errs = append(errs, field.Invalid(op, "", "at least one of perPod or perContainer must be set"))
			}
			if o.PerPod != nil && o.PerPod.Sign() < 0 {
				errs = append(errs, field.Invalid(op.Child("perPod"), o.PerPod.String(), "must be non-negative"))
			}
			if o.PerContainer != nil && o.PerContainer.Sign() < 0 {
				errs = append(errs, field.Invalid(op.Child("perContainer"), o.PerContainer.String(), "must be non-negative"))
			}
		}
		return errs
	})
}

// nodeAllocatableMapping: capacityKey (with capacityMultiplier) and
// deviceMultiplier are union members, so exactly one way of mapping is used;
// capacityKey must name a capacity of the (flattened) device; multipliers
// are positive.
func nodeAllocatableMapping(m *resourcev1.NodeAllocatableMapping, view api.DeviceView, resolved bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case m.CapacityKey != nil && m.DeviceMultiplier != nil:
		errs = append(errs, field.Invalid(p, "{`capacityKey`, `deviceMultiplier`}", "exactly one of `capacityKey` or `deviceMultiplier` may be set"))
	case m.CapacityKey == nil && m.DeviceMultiplier == nil && m.CapacityMultiplier == nil:
		errs = append(errs, field.Required(p, "exactly one of `capacityKey` or `deviceMultiplier` is required"))
	}
	if m.CapacityKey != nil {
		kp := p.Child("capacityKey")
		if *m.CapacityKey == "" {
			errs = append(errs, field.Invalid(kp, "", "capacityKey must not be an empty string"))
		} else if nameErrs := qualifiedName(string(*m.CapacityKey), kp); len(nameErrs) > 0 {
			// 1.38 reports a key that cannot be a capacity name as such,
			// 1.37 only that no capacity has it.
			errs = append(errs, nameErrs.WithOrigin(originCapacityKeyFormat)...)
			if _, found := view.Capacity(*m.CapacityKey); resolved && !found {
				errs = append(errs, field.NotFound(kp, *m.CapacityKey).WithOrigin(originCapacityKeyNotFound))
			}
		} else if _, found := view.Capacity(*m.CapacityKey); resolved && !found {
			errs = append(errs, field.NotFound(kp, *m.CapacityKey))
		}
		if m.CapacityMultiplier == nil {
			errs = append(errs, field.Required(p.Child("capacityMultiplier"), "capacityMultiplier is required when capacityKey is set"))
		}
	}
	if m.CapacityMultiplier != nil {
		if m.CapacityKey == nil {
			errs = append(errs, field.Required(p.Child("capacityKey"), "capacityKey is required when capacityMultiplier is set"))
		}
		if m.CapacityMultiplier.Sign() <= 0 {
			errs = append(errs, field.Invalid(p.Child("capacityMultiplier"), m.CapacityMultiplier.String(), "must be positive"))
		}
	}
	if m.DeviceMultiplier != nil && m.DeviceMultiplier.Sign() <= 0 {
		errs = append(errs, field.Invalid(p.Child("deviceMultiplier"), m.DeviceMultiplier.String(), "must be positive"))
	}
	return errs
}
