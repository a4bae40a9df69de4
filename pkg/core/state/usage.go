package state

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
)

// PoolUsage is one pool together with what the snapshot's allocations hold
// of it: the read model of `get pools`, `describe`, the pool monitor and
// the simulator's pictures. It is computed on first request and shared.
type PoolUsage struct {
	*pool.Pool
	// Invalid lists the problems of a complete pool that fails validation.
	Invalid *pool.InvalidError
	// Devices are the devices of the pool's current generation, slice by
	// slice (slices by name) in the order each slice lists them.
	Devices []DeviceUsage
	// CounterSets are the pool's counter sets, by name.
	CounterSets []CounterSetUsage
}

// DeviceUsage is one device and who holds it.
type DeviceUsage struct {
	Slice  *pool.Slice
	Device *api.Device
	// View resolves the device's mixins; ViewErr is set when an include
	// names no mixin (the pool is then invalid).
	View    api.DeviceView
	ViewErr error
	// Holders are the claims whose allocation names the device: one for a
	// dedicated device, any number for a device that allows multiple
	// allocations or for admin access.
	Holders []Holder
	// Blocked: nobody holds the device, but the counters it consumes are
	// no longer available (an overlapping partition is allocated).
	Blocked bool
}

// InUse reports whether a holder other than an admin-access one holds the
// device, which is when its counters count as consumed.
func (d *DeviceUsage) InUse() bool {
	return slices.ContainsFunc(d.Holders, func(h Holder) bool { return !h.AdminAccess })
}

// Holder is one allocation result that names a device.
type Holder struct {
	Claim       ClaimKey
	Request     string
	Assumed     bool
	Shared      bool // the result has a shareID
	AdminAccess bool
}

// CounterSetUsage is one counter set's capacity and consumption.
type CounterSetUsage struct {
	Name     string
	Counters []CounterUsage // by name
}

// CounterUsage is one counter: what the set offers and what the devices in
// use consume from it.
type CounterUsage struct {
	Name     string
	Capacity resource.Quantity
	Consumed resource.Quantity
}

// Usage returns the usage of one pool, or nil when there is no such pool.
// It is computed once and shared with later snapshots until the pool's
// slices or the claims holding its devices change.
func (s *Snapshot) Usage(id pool.ID) *PoolUsage {
	e, ok := s.pools.get(id)
	if !ok || e.ver == nil {
		return nil
	}
	e.usageOnce.Do(func() { e.usage = e.computeUsage() })
	return e.usage
}

func (e *poolEntry) computeUsage() *PoolUsage {
	p := e.ver.p
	u := &PoolUsage{Pool: p, Invalid: e.ver.validate()}
	n := 0
	for _, sl := range p.Slices {
		n += len(sl.Spec.Devices)
	}
	u.Devices = make([]DeviceUsage, 0, n)
	for _, sl := range p.Slices {
		views := sl.Mixins.Views(sl.Spec.Devices)
		for i := range sl.Spec.Devices {
			d := &sl.Spec.Devices[i]
			du := DeviceUsage{Slice: sl, Device: d}
			du.View, du.ViewErr = views.Device(d)
			u.Devices = append(u.Devices, du)
		}
	}
	if len(e.held) > 0 {
		// The first device of each name holds, as the allocator does.
		index := make(map[string]int, len(u.Devices))
		for i := len(u.Devices) - 1; i >= 0; i-- {
			index[u.Devices[i].Device.Name] = i
		}
		for _, h := range e.held {
			i, ok := index[h.r.Device]
			if !ok {
				continue
			}
			u.Devices[i].Holders = append(u.Devices[i].Holders, Holder{
				Claim: h.claim, Request: h.r.Request, Assumed: h.assumed,
				Shared: h.r.ShareID != nil, AdminAccess: ptr.Deref(h.r.AdminAccess, false),
			})
		}
	}
	sets := p.CounterSets()
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	slices.Sort(names)
	consumed := map[string]map[string]*resource.Quantity{}
	for _, n := range names {
		cs := CounterSetUsage{Name: n}
		consumed[n] = map[string]*resource.Quantity{}
		for c, v := range sets[n].Counters() {
			cs.Counters = append(cs.Counters, CounterUsage{Name: c, Capacity: v.Value.DeepCopy()})
		}
		slices.SortFunc(cs.Counters, func(x, y CounterUsage) int { return strings.Compare(x.Name, y.Name) })
		for i := range cs.Counters {
			consumed[n][cs.Counters[i].Name] = &cs.Counters[i].Consumed
		}
		u.CounterSets = append(u.CounterSets, cs)
	}
	for i := range u.Devices {
		d := &u.Devices[i]
		if d.ViewErr != nil || !d.InUse() {
			continue
		}
		for _, cv := range d.View.Consumptions {
			for name, c := range cv.Counters() {
				// An amount out of range (which makes the pool invalid)
				// would take minutes to add.
				if q := consumed[cv.CounterSet()][name]; q != nil && api.QuantityInRange(c.Value) {
					q.Add(c.Value)
				}
			}
		}
	}
	left := remaining(u)
	for i := range u.Devices {
		d := &u.Devices[i]
		if len(d.Holders) > 0 || d.ViewErr != nil {
			continue
		}
		d.Blocked = !fits(d.View, left)
	}
	return u
}

// remaining is what is left of each counter of each set: nil for a
// counter whose capacity is out of range (see api.QuantityInRange), which
// no device can have.
func remaining(u *PoolUsage) map[string]map[string]*resource.Quantity {
	out := make(map[string]map[string]*resource.Quantity, len(u.CounterSets))
	for _, cs := range u.CounterSets {
		byName := make(map[string]*resource.Quantity, len(cs.Counters))
		for _, c := range cs.Counters {
			byName[c.Name] = nil
			if api.QuantityInRange(c.Capacity) {
				left := c.Capacity.DeepCopy()
				left.Sub(c.Consumed)
				byName[c.Name] = &left
			}
		}
		out[cs.Name] = byName
	}
	return out
}

// fits reports whether every counter the device consumes is still there in
// the amount it needs.
func fits(v api.DeviceView, left map[string]map[string]*resource.Quantity) bool {
	for _, cv := range v.Consumptions {
		byName := left[cv.CounterSet()]
		if byName == nil {
			return false
		}
		for name, c := range cv.Counters() {
			q := byName[name]
			if q == nil || !api.QuantityInRange(c.Value) || q.Cmp(c.Value) < 0 {
				return false
			}
		}
	}
	return true
}
