package prepare

import (
	"cmp"
	"maps"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// Inventory is what the kit knows about the published devices: what each
// consumes from which counter set, and what the counter sets hold. The
// kit checks prepares against it (SetInventory); the driver's health
// taints follow its counter sets (Children).
type Inventory struct {
	consumes map[DeviceKey][]resourcev1.DeviceCounterConsumption
	sets     map[counterSetKey]map[string]resource.Quantity
}

func newInventory() Inventory {
	return Inventory{consumes: map[DeviceKey][]resourcev1.DeviceCounterConsumption{}, sets: map[counterSetKey]map[string]resource.Quantity{}}
}

// InventoryOf is the inventory of what the resourceslice controller
// publishes.
func InventoryOf(r resourceslice.DriverResources) Inventory {
	inv := newInventory()
	for pool, p := range r.Pools {
		for _, s := range p.Slices {
			inv.add(pool, s.Devices, s.SharedCounters)
		}
	}
	return inv
}

func (inv Inventory) add(pool string, devices []resourcev1.Device, sets []resourcev1.CounterSet) {
	for _, d := range devices {
		inv.consumes[DeviceKey{pool, d.Name}] = d.ConsumesCounters
	}
	for _, cs := range sets {
		m := make(map[string]resource.Quantity, len(cs.Counters))
		for name, c := range cs.Counters {
			m[name] = c.Value
		}
		inv.sets[counterSetKey{pool, cs.Name}] = m
	}
}

// Known reports whether the device is published.
func (inv Inventory) Known(k DeviceKey) bool {
	_, ok := inv.consumes[k]
	return ok
}

// Devices are the published devices, by pool and then device name.
func (inv Inventory) Devices() []DeviceKey {
	return slices.SortedFunc(maps.Keys(inv.consumes), func(a, b DeviceKey) int {
		if a.Pool != b.Pool {
			return cmp.Compare(a.Pool, b.Pool)
		}
		return cmp.Compare(a.Device, b.Device)
	})
}

// Children are the devices drawing on a counter set that k consumes
// whole: the partitions of a GPU.
func (inv Inventory) Children(k DeviceKey) []DeviceKey {
	var whole []counterSetKey
	for _, c := range inv.consumes[k] {
		set := counterSetKey{k.Pool, c.CounterSet}
		capacity, ok := inv.sets[set]
		if !ok || len(capacity) == 0 {
			continue
		}
		all := true
		for name, limit := range capacity {
			v, ok := c.Counters[name]
			if !ok || v.Value.Cmp(limit) < 0 {
				all = false
				break
			}
		}
		if all {
			whole = append(whole, set)
		}
	}
	if len(whole) == 0 {
		return nil
	}
	var out []DeviceKey
	for other, cs := range inv.consumes {
		if other == k || other.Pool != k.Pool {
			continue
		}
		if slices.ContainsFunc(cs, func(c resourcev1.DeviceCounterConsumption) bool {
			return slices.Contains(whole, counterSetKey{k.Pool, c.CounterSet})
		}) {
			out = append(out, other)
		}
	}
	return out
}
