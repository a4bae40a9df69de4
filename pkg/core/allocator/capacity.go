package allocator

import (
	"errors"
	"fmt"
	"math"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/pkg/core/api"
)

// Consumable capacity (the ResourceSlice API reference,
// "DeviceCapacity.requestPolicy"; KEP-5075). Every
// capacity of a device is consumed by every allocation: what the request
// asks for rounded up to the policy, or the policy default, or, when
// neither, the whole capacity. A device fits when each consumed amount obeys
// the policy and, added to what is consumed already, stays within the
// capacity. Upstream applies this to every device, shared or not, and only
// with DRAConsumableCapacity on. frac selects the DRAFractionalCapacityRange
// arithmetic: ranges with fractional bounds are rounded in milli units.

// capArith is how consumed capacity is computed: the gates' and the
// minor's choices.
type capArith struct {
	frac bool // DRAFractionalCapacityRange
	// refuseNegative (ruleNegativeRequestRefused): a negative request is
	// an error even where the policy would round it up.
	refuseNegative bool
	// driver (ruleCapacityDriverDomain) is the device's driver, the
	// domain of its capacity names that have none; empty, names are
	// compared as written.
	driver string
}

// capArith is how the allocator computes d's consumed capacity.
func (a *Allocator) capArith(d *devInfo) capArith {
	ar := capArith{frac: a.g.fractional, refuseNegative: a.rules.has(ruleNegativeRequestRefused)}
	if a.rules.has(ruleCapacityDriverDomain) {
		ar.driver = d.t.p.Driver
	}
	return ar
}

// resolve names the capacities of req and of the device (caps) as
// Kubernetes 1.38 does (draapi.FullyQualifiedName, KEP-5075): a name
// without a domain has the device's driver as its domain, so "memory" and
// "<driver>/memory" are one capacity. A device that publishes a capacity
// both ways is read by its qualified entry, as attributes are; a request
// that asks for one both ways is ambiguous, an error. The names that come
// back are the device's own spellings, which results record: the
// spelling the driver published is the one it looks up in the claim's
// status. ok is false when the device lacks a requested capacity.
func (ar capArith) resolve(req *resourcev1.CapacityRequirements, caps map[api.QualifiedName]api.DeviceCapacity) (_ *resourcev1.CapacityRequirements, _ map[api.QualifiedName]api.DeviceCapacity, ok bool, _ error) {
	caps = ar.visible(caps)
	if req == nil || len(req.Requests) == 0 {
		return req, caps, true, nil
	}
	same := true
	for name := range req.Requests {
		k, found := ar.key(name, caps)
		if !found {
			return nil, nil, false, nil
		}
		same = same && k == name
	}
	if same {
		// A name asked for both ways resolves to another name at least once.
		return req, caps, true, nil
	}
	out := &resourcev1.CapacityRequirements{Requests: make(map[resourcev1.QualifiedName]resource.Quantity, len(req.Requests))}
	for name, q := range req.Requests {
		k, _ := ar.key(name, caps)
		if _, dup := out.Requests[k]; dup {
			id := k[strings.LastIndex(string(k), "/")+1:]
			return nil, nil, false, fmt.Errorf("capacity %q requested both as %q and as %q", id, id, ar.driver+"/"+string(id))
		}
		out.Requests[k] = q
	}
	return out, caps, true, nil
}

// key is the device's spelling of the capacity a request names.
func (ar capArith) key(name api.QualifiedName, caps map[api.QualifiedName]api.DeviceCapacity) (api.QualifiedName, bool) {
	domain, id, qualified := strings.Cut(string(name), "/")
	if !qualified {
		id = domain
	} else if domain != ar.driver {
		_, ok := caps[name]
		return name, ok
	}
	if q := api.QualifiedName(ar.driver + "/" + id); hasCap(caps, q) {
		return q, true
	}
	return api.QualifiedName(id), hasCap(caps, api.QualifiedName(id))
}

func hasCap(caps map[api.QualifiedName]api.DeviceCapacity, name api.QualifiedName) bool {
	_, ok := caps[name]
	return ok
}

// visible drops the unqualified entries of caps that a qualified entry of
// the driver's shadows; caps itself when there are none, the common case.
func (ar capArith) visible(caps map[api.QualifiedName]api.DeviceCapacity) map[api.QualifiedName]api.DeviceCapacity {
	shadowed := func(name api.QualifiedName) bool {
		return !strings.Contains(string(name), "/") && hasCap(caps, api.QualifiedName(ar.driver+"/"+string(name)))
	}
	n := 0
	for name := range caps {
		if shadowed(name) {
			n++
		}
	}
	if n == 0 {
		return caps
	}
	out := make(map[api.QualifiedName]api.DeviceCapacity, len(caps)-n)
	for name, c := range caps {
		if !shadowed(name) {
			out[name] = c
		}
	}
	return out
}

// used is what m records as consumed of the device's capacity name: with
// driver domains, under either spelling, since held results name it as
// their driver or an older kube-scheduler wrote it.
func (ar capArith) used(m capMap, name api.QualifiedName) (resource.Quantity, bool) {
	q, ok := m[name]
	if ar.driver == "" || m == nil {
		return q, ok
	}
	var other api.QualifiedName
	if domain, id, qualified := strings.Cut(string(name), "/"); !qualified {
		other = api.QualifiedName(ar.driver + "/" + domain)
	} else if domain == ar.driver {
		other = api.QualifiedName(id)
	} else {
		return q, ok
	}
	if o, found := m[other]; found {
		if !ok {
			return o, true
		}
		q = q.DeepCopy()
		q.Add(o)
		ok = true
	}
	return q, ok
}

var errNotRepresentable = errors.New("capacity request cannot be represented in the device's range arithmetic")

type capMap = map[api.QualifiedName]resource.Quantity

// capacityFits reports whether req fits caps on top of the two consumed
// maps (either may be nil).
func capacityFits(req *resourcev1.CapacityRequirements, caps map[api.QualifiedName]api.DeviceCapacity, used1, used2 capMap, ar capArith) (bool, error) {
	if ar.driver != "" {
		var ok bool
		var err error
		if req, caps, ok, err = ar.resolve(req, caps); !ok {
			return false, err
		}
	}
	if req != nil {
		for name, q := range req.Requests {
			if _, ok := caps[name]; !ok {
				return false, nil
			}
			if !api.QuantityInRange(q) {
				// Rounding it to the device's policy would compute with as
				// many digits as its exponent (api.QuantityInRange).
				return false, fmt.Errorf("capacity %q: %w: request magnitude beyond %g", name, errNotRepresentable, api.MaxQuantity)
			}
		}
	}
	// Every consumed amount is computed (and may fail) before any is
	// checked. A device has few capacities; they stay on the stack.
	var names [8]api.QualifiedName
	var amounts [8]resource.Quantity
	if len(caps) > len(names) {
		return capacityFitsMany(req, caps, used1, used2, ar)
	}
	n := 0
	for name, c := range caps {
		q, err := consumedOne(req, name, c, ar)
		if err != nil {
			return false, err
		}
		names[n], amounts[n] = name, q
		n++
	}
	for i := range n {
		if !fitsOne(names[i], amounts[i], caps[names[i]], used1, used2, ar) {
			return false, nil
		}
	}
	return true, nil
}

// capacityFitsMany is capacityFits for devices with many capacities.
func capacityFitsMany(req *resourcev1.CapacityRequirements, caps map[api.QualifiedName]api.DeviceCapacity, used1, used2 capMap, ar capArith) (bool, error) {
	consumed, err := consumption(req, caps, ar)
	if err != nil {
		return false, err
	}
	for name, c := range caps {
		if !fitsOne(name, consumed[name], c, used1, used2, ar) {
			return false, nil
		}
	}
	return true, nil
}

// fitsOne: the amount obeys the capacity's policy and, added to what is
// consumed already, stays within the capacity.
func fitsOne(name api.QualifiedName, q resource.Quantity, c api.DeviceCapacity, used1, used2 capMap, ar capArith) bool {
	if violatesPolicy(q, c.RequestPolicy, ar.frac) {
		return false
	}
	total := q.DeepCopy()
	if u, ok := ar.used(used1, name); ok {
		total.Add(u)
	}
	if u, ok := ar.used(used2, name); ok {
		total.Add(u)
	}
	return total.Cmp(c.Value) <= 0
}

// consumption is what one allocation of the device consumes of each of its
// capacities.
func consumption(req *resourcev1.CapacityRequirements, caps map[api.QualifiedName]api.DeviceCapacity, ar capArith) (capMap, error) {
	if ar.driver != "" {
		var ok bool
		var err error
		if req, caps, ok, err = ar.resolve(req, caps); err != nil {
			return nil, err
		} else if !ok {
			return nil, errors.New("the device lacks a requested capacity")
		}
	}
	out := make(capMap, len(caps))
	for name, c := range caps {
		q, err := consumedOne(req, name, c, ar)
		if err != nil {
			return nil, err
		}
		out[name] = q
	}
	return out, nil
}

// consumedOne is what one allocation consumes of one capacity.
func consumedOne(req *resourcev1.CapacityRequirements, name api.QualifiedName, c api.DeviceCapacity, ar capArith) (resource.Quantity, error) {
	var asked *resource.Quantity
	if req != nil {
		if q, ok := req.Requests[name]; ok {
			asked = &q
		}
	}
	if ar.refuseNegative && asked != nil && asked.Sign() < 0 {
		// Before the policy rounds it up to a valid amount, which would
		// hide it.
		return resource.Quantity{}, fmt.Errorf("capacity %q: capacity value is negative: request %s", name, asked.String())
	}
	q, err := consumedAmount(asked, c, ar.frac)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("capacity %q: %w", name, err)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("capacity %q: capacity value is negative", name)
	}
	return q, nil
}

func consumedAmount(asked *resource.Quantity, c api.DeviceCapacity, frac bool) (resource.Quantity, error) {
	p := c.RequestPolicy
	if asked == nil {
		if p != nil && p.Default != nil {
			return p.Default.DeepCopy(), nil
		}
		return c.Value.DeepCopy(), nil
	}
	switch {
	case p == nil:
		return asked.DeepCopy(), nil
	case p.ValidRange != nil && p.ValidRange.Min != nil:
		return roundUpRange(*asked, p.ValidRange, frac)
	case p.ValidValues != nil:
		for _, v := range p.ValidValues {
			if asked.Cmp(v) <= 0 {
				return v.DeepCopy(), nil
			}
		}
	}
	return asked.DeepCopy(), nil
}

// roundUpRange raises a request below min to min and otherwise rounds it up
// to min plus a whole number of steps. With fractional ranges the step
// arithmetic runs in milli units when every bound is representable there.
func roundUpRange(asked resource.Quantity, r *resourcev1.CapacityRequestPolicyRange, frac bool) (resource.Quantity, error) {
	if asked.Cmp(*r.Min) < 0 {
		return r.Min.DeepCopy(), nil
	}
	if r.Step == nil {
		return asked, nil
	}
	if useMilli(r, frac) {
		req, err := exactMilli(asked)
		if err != nil {
			return resource.Quantity{}, fmt.Errorf("%w: request %s is not a representable milli value", errNotRepresentable, asked.String())
		}
		step, lo := r.Step.MilliValue(), r.Min.MilliValue()
		n := ceilDiv(req-lo, step)
		if n > (math.MaxInt64-lo)/step {
			return resource.Quantity{}, fmt.Errorf("%w: rounding request %s up passes the milli-value range", errNotRepresentable, asked.String())
		}
		v := lo + step*n
		if v%1000 == 0 {
			return *resource.NewQuantity(v/1000, r.Step.Format), nil
		}
		return *resource.NewMilliQuantity(v, r.Step.Format), nil
	}
	if asked.CmpInt64(math.MaxInt64) > 0 {
		return resource.Quantity{}, fmt.Errorf("%w: request %s exceeds MaxInt64", errNotRepresentable, asked.String())
	}
	step, lo := r.Step.Value(), r.Min.Value()
	n := ceilDiv(asked.Value()-lo, step)
	if lo >= 0 && n > (math.MaxInt64-lo)/step {
		return resource.Quantity{}, fmt.Errorf("%w: rounding request %s up passes MaxInt64", errNotRepresentable, asked.String())
	}
	return *resource.NewQuantity(lo+step*n, r.Step.Format), nil
}

func ceilDiv(a, b int64) int64 {
	n := a / b
	if a%b != 0 {
		n++
	}
	return n
}

func violatesPolicy(q resource.Quantity, p *resourcev1.CapacityRequestPolicy, frac bool) bool {
	if p == nil {
		return false
	}
	if p.Default != nil && q.Cmp(*p.Default) == 0 {
		return false
	}
	switch {
	case p.ValidRange != nil:
		r := p.ValidRange
		if r.Max != nil && q.Cmp(*r.Max) > 0 {
			return true
		}
		if r.Step != nil {
			var v, step, lo int64
			if useMilli(r, frac) {
				var err error
				if v, err = exactMilli(q); err != nil {
					return true
				}
				step, lo = r.Step.MilliValue(), r.Min.MilliValue()
			} else {
				v, step, lo = q.Value(), r.Step.Value(), r.Min.Value()
			}
			if step == 0 || (v-lo)%step != 0 {
				return true
			}
		}
	case len(p.ValidValues) > 0:
		for _, v := range p.ValidValues {
			if q.Cmp(v) == 0 {
				return false
			}
		}
		return true
	}
	return false
}

func useMilli(r *resourcev1.CapacityRequestPolicyRange, frac bool) bool {
	if !frac {
		return false
	}
	for _, q := range []*resource.Quantity{r.Min, r.Max, r.Step} {
		if q == nil {
			continue
		}
		if _, err := exactMilli(*q); err != nil {
			return false
		}
	}
	if r.Step != nil && r.Step.MilliValue() < 1 {
		return false
	}
	return true
}

func exactMilli(q resource.Quantity) (int64, error) {
	m := q.MilliValue()
	if q.Cmp(*resource.NewMilliQuantity(m, q.Format)) != 0 {
		return 0, errors.New("value must be representable in milli units")
	}
	return m, nil
}

func addCap(dst capMap, src capMap) capMap {
	if dst == nil {
		dst = capMap{}
	}
	for n, q := range src {
		cur := dst[n]
		cur.Add(q)
		dst[n] = cur
	}
	return dst
}

func subCap(dst capMap, src capMap) {
	for n, q := range src {
		if cur, ok := dst[n]; ok {
			cur.Sub(q)
			dst[n] = cur
		}
	}
}

func capEmpty(m capMap) bool {
	for _, q := range m {
		if !q.IsZero() {
			return false
		}
	}
	return true
}
