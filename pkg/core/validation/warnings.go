package validation

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/core/api"
)

// Warning is something kube-apiserver accepts but dractl considers a
// mistake: an object with warnings is still valid. Errors say whether an
// object would be admitted; warnings are kept apart so that promise holds.
type Warning struct {
	Field   string // full field path, as in field.Error
	Message string
	// origin names the version rule that makes the warning, when only
	// some kube-apiserver minors accept what it is about (versions.go).
	origin string
}

func (w Warning) String() string { return w.Field + ": " + w.Message }

type warnings []Warning

func (ws *warnings) add(p *field.Path, format string, args ...any) {
	*ws = append(*ws, Warning{Field: p.String(), Message: fmt.Sprintf(format, args...)})
}

// addFor adds a warning that only the minors of the version rule origin
// give: the others refuse what it is about.
func (ws *warnings) addFor(origin string, p *field.Path, format string, args ...any) {
	ws.add(p, format, args...)
	(*ws)[len(*ws)-1].origin = origin
}

// resourceSliceWarnings reports what ResourceSlice accepts because
// kube-apiserver does, although the seeds advise against it:
//
//   - more than 2048 counters consumed by the devices of a plain slice
//     (KEP-4815 "Limits"; with mixins it is an error, KEP-5234);
//   - a device nodeSelector with more than one term (the v1 API reference says "must use
//     exactly one term", the apiserver only checks the slice's selector);
//   - a negative validRange.min where the apiserver does not reject it
//     (it does only when a step is set and no bound is fractional);
//   - validValues entries that are equal but written differently (1 and
//     1000m): the apiserver compares their decimal form, not their value;
//   - a slice near etcd's bound on one stored value (StoredSize at least
//     SizeWarningBytes).
//
// Like ResourceSlice it is deterministic. It does not repeat errors: call
// it in addition to ResourceSlice.
func resourceSliceWarnings(s *api.ResourceSlice) []Warning {
	if s == nil {
		return nil
	}
	var ws warnings
	spec := &s.Spec
	p := field.NewPath("spec")
	devicesPath := p.Child("devices")
	consumed := 0
	for i := range spec.Devices {
		d := &spec.Devices[i]
		for j := range d.ConsumesCounters {
			consumed += len(d.ConsumesCounters[j].Counters)
		}
		dp := devicesPath.Index(i)
		if d.NodeSelector != nil && len(d.NodeSelector.NodeSelectorTerms) > 1 {
			ws.addFor(originDeviceSelectorTermsWarn, dp.Child("nodeSelector", "nodeSelectorTerms"), "has %d terms; the API reference asks for exactly one (kube-apiserver 1.37 accepts more, 1.38 refuses them)", len(d.NodeSelector.NodeSelectorTerms))
		}
		if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
			capacityPolicyWarnings(&ws, d.Capacity, dp.Child("capacity"))
		}
	}
	if !s.UsesMixins() && consumed > MaxConsumedCountersPerSlice {
		ws.add(devicesPath, "devices consume %d counters in total, more than the %d that KEP-4815 and KEP-5234 allow per slice (kube-apiserver 1.37 no longer checks it)", consumed, MaxConsumedCountersPerSlice)
	}
	if n := StoredSize(s); n >= SizeWarningBytes {
		ws.add(field.NewPath("metadata"), "the slice takes %d bytes as stored, %d%% of the %d bytes etcd stores in one value by default: kube-apiserver refuses it once it grows past that", n, n*100/EtcdMaxObjectBytes, EtcdMaxObjectBytes)
	}
	if m := spec.Mixins; m != nil {
		mp := p.Child("mixins", "device")
		for i := range m.Device {
			capacityPolicyWarnings(&ws, m.Device[i].Capacity, mp.Index(i).Child("capacity"))
		}
	}
	return ws
}

func capacityPolicyWarnings(ws *warnings, caps map[api.QualifiedName]api.DeviceCapacity, p *field.Path) {
	for _, name := range sortedKeys(caps) {
		c := caps[name]
		if c.RequestPolicy == nil {
			continue
		}
		pp := keyPath(p, string(name), qualifiedKeyMaxPathLength).Child("requestPolicy")
		pol := c.RequestPolicy
		for i := 1; i < len(pol.ValidValues); i++ {
			a, b := pol.ValidValues[i-1], pol.ValidValues[i]
			if a.Cmp(b) == 0 && validValuesKey(a) != validValuesKey(b) {
				ws.add(pp.Child("validValues").Index(i), "%s equals the previous value %s; kube-apiserver accepts it only because it is written differently", b.String(), a.String())
			}
		}
		if r := pol.ValidRange; r != nil && r.Min != nil && r.Min.Sign() < 0 && pol.Default != nil && !rejectsNegativeMin(c.Value, pol, pp) {
			ws.add(pp.Child("validRange", "min"), "%s is negative; no request can use less than nothing (kube-apiserver accepts it unless a whole-number step is set)", r.Min.String())
		}
	}
}

// rejectsNegativeMin reports whether requestPolicy already reports the
// negative min as an error, so that the warning does not repeat it.
func rejectsNegativeMin(capacity resource.Quantity, pol *resourcev1.CapacityRequestPolicy, pp *field.Path) bool {
	minPath := pp.Child("validRange", "min").String()
	for _, e := range requestPolicy(capacity, pol, pp) {
		if e.Field == minPath && e.Detail == negativeDetail {
			return true
		}
	}
	return false
}

// resourceClaimWarnings reports what kube-apiserver accepts in a claim
// although it cannot work as written:
//
//   - a constraint that sets both matchAttribute and distinctAttribute (the
//     apiserver uses matchAttribute and ignores the other);
//   - capacity requests with a malformed capacity name (no device can have
//     it) or a negative amount;
//   - anything in status: the apiserver drops the status of a created
//     claim, so problems in status.allocation only matter to tools that
//     read the manifest directly.
func resourceClaimWarnings(c *resourcev1.ResourceClaim) []Warning {
	if c == nil {
		return nil
	}
	var ws warnings
	claimSpecWarnings(&ws, &c.Spec.Devices, field.NewPath("spec", "devices"))
	if a := c.Status.Allocation; a != nil {
		names := gatherRequestNames(&c.Spec.Devices)
		for _, e := range allocation(a, names, field.NewPath("status", "allocation")) {
			ws = append(ws, Warning{Field: e.Field, Message: "ignored on create (kube-apiserver drops the status): " + e.ErrorBody()})
		}
	}
	return ws
}

// resourceClaimTemplateWarnings is ResourceClaimWarnings for the claim
// spec of a template.
func resourceClaimTemplateWarnings(t *resourcev1.ResourceClaimTemplate) []Warning {
	if t == nil {
		return nil
	}
	var ws warnings
	claimSpecWarnings(&ws, &t.Spec.Spec.Devices, field.NewPath("spec", "spec", "devices"))
	return ws
}

func claimSpecWarnings(ws *warnings, dc *resourcev1.DeviceClaim, p *field.Path) {
	for i := range dc.Requests {
		r := &dc.Requests[i]
		rp := p.Child("requests").Index(i)
		if r.Exactly != nil {
			capacityRequestWarnings(ws, r.Exactly.Capacity, rp.Child("exactly"))
		}
		for j := range r.FirstAvailable {
			capacityRequestWarnings(ws, r.FirstAvailable[j].Capacity, rp.Child("firstAvailable").Index(j))
		}
	}
	for i := range dc.Constraints {
		c := &dc.Constraints[i]
		if c.MatchAttribute != nil && c.DistinctAttribute != nil {
			ws.add(p.Child("constraints").Index(i), "sets both `matchAttribute` and `distinctAttribute`; only `matchAttribute` takes effect")
		}
	}
}

func capacityRequestWarnings(ws *warnings, capacity *resourcev1.CapacityRequirements, p *field.Path) {
	if capacity == nil {
		return
	}
	cp := p.Child("capacity", "requests")
	for _, name := range sortedKeys(capacity.Requests) {
		kp := keyPath(cp, string(name), qualifiedKeyMaxPathLength)
		for _, e := range qualifiedName(string(name), kp) {
			if e.Origin == originNameSlashes {
				// Where this warning is given (1.37), devices may have
				// such capacities.
				continue
			}
			ws.addFor(originClaimCapacityNamesWarn, kp, "not a valid capacity name, so no device matches: %s", e.ErrorBody())
		}
		if q := capacity.Requests[name]; q.Sign() < 0 {
			ws.add(kp, "%s is negative; no device capacity is needed for it", q.String())
		}
	}
}
