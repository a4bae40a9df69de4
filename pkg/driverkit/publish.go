package driverkit

import (
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/flatten"
	"github.com/dractl/dractl/pkg/pool"
	"github.com/dractl/dractl/pkg/validation"
)

// InvalidPoolError is a pool description the kit refused to publish. It
// lists every problem, each with the described slice and a field path.
type InvalidPoolError struct {
	Problems []string
}

func (e *InvalidPoolError) Error() string {
	return fmt.Sprintf("refusing to publish an invalid pool (%d problems): %s", len(e.Problems), strings.Join(e.Problems, "; "))
}

// Published is a pool description made ready for the resourceslice
// controller, and what the kit needs to know about it to refuse
// conflicting prepares.
type Published struct {
	Resources resourceslice.DriverResources
	// Slices are the flattened slices as they will be stored, in
	// publishing order (names are the kit's, not the server's).
	Slices    []*api.ResourceSlice
	inventory inventory
}

// Build turns a pool description into what the resourceslice controller
// publishes. The description is a list of ResourceSlices in dractl's API
// (KEP-5234 mixins allowed) for this driver and node; names, generations
// and resourceSliceCount are the kit's to set, the order of slices and
// devices is kept (it is the allocator's first-fit order).
//
// Every described slice passes admission as written (mixins and all),
// then is flattened — no server accepts spec.mixins yet — with counter
// sets moved into slices of their own (KEP-4815 "Limits") and devices
// split over as many slices as the v1 per-slice limits require; every
// flattened slice passes v1 admission and each pool passes pool
// validation (KEP-4815 "Validation"). Any problem refuses the whole
// description: publishing part of a pool would make it incomplete or
// invalid for the scheduler.
func Build(driver, node string, desc []*api.ResourceSlice) (*Published, error) {
	var problems []string
	report := func(where string, errs field.ErrorList) {
		for _, e := range errs {
			problems = append(problems, where+": "+e.Error())
		}
	}

	type described struct {
		slices []*api.ResourceSlice
	}
	pools := map[string]*described{}
	var poolOrder []string
	for i, in := range desc {
		s := in.DeepCopy()
		where := fmt.Sprintf("slice %d (%s)", i, s.Name)
		if s.Spec.Driver == "" {
			s.Spec.Driver = driver
		}
		if s.Spec.Driver != driver {
			report(where, field.ErrorList{field.Invalid(field.NewPath("spec", "driver"), s.Spec.Driver, "this kit publishes for driver "+driver)})
			continue
		}
		if s.Spec.Pool.Name == "" {
			s.Spec.Pool.Name = node
		}
		if s.Spec.NodeSelector != nil || ptr.Deref(s.Spec.AllNodes, false) {
			report(where, field.ErrorList{field.Forbidden(field.NewPath("spec"), "a kubelet plugin publishes node-local pools: nodeSelector and allNodes are for central controllers")})
			continue
		}
		if !ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
			s.Spec.NodeName = ptr.To(node)
		}
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s-%d", s.Spec.Pool.Name, i)
		}
		d := pools[s.Spec.Pool.Name]
		if d == nil {
			d = &described{}
			pools[s.Spec.Pool.Name] = d
			poolOrder = append(poolOrder, s.Spec.Pool.Name)
		}
		d.slices = append(d.slices, s)
	}

	out := &Published{Resources: resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{}}, inventory: newInventory()}
	for _, name := range poolOrder {
		d := pools[name]
		for _, s := range d.slices {
			s.Spec.Pool.Generation, s.Spec.Pool.ResourceSliceCount = 1, int64(len(d.slices))
			report(fmt.Sprintf("pool %s slice %s", name, s.Name), validation.ResourceSlice(s))
		}
		var flat []*api.ResourceSlice
		for _, s := range d.slices {
			f, err := flatten.ForV1(s)
			if err != nil {
				problems = append(problems, fmt.Sprintf("pool %s slice %s: %v", name, s.Name, err))
				continue
			}
			flat = append(flat, f...)
		}
		for _, f := range flat {
			f.Spec.Pool.ResourceSliceCount = int64(len(flat))
			report(fmt.Sprintf("pool %s slice %s (flattened)", name, f.Name), validation.ResourceSlice(f))
		}
		for _, p := range pool.Assemble(flat) {
			if err := p.Validate(); err != nil {
				for _, pr := range err.Problems {
					problems = append(problems, fmt.Sprintf("pool %s: %s", name, pr.String()))
				}
			}
		}
		if len(problems) > 0 {
			continue
		}
		rp := resourceslice.Pool{}
		for _, f := range flat {
			v1, err := api.ToV1(f)
			if err != nil {
				problems = append(problems, fmt.Sprintf("pool %s slice %s: %v", name, f.Name, err))
				continue
			}
			rp.Slices = append(rp.Slices, resourceslice.Slice{
				Devices:                v1.Spec.Devices,
				SharedCounters:         v1.Spec.SharedCounters,
				PerDeviceNodeSelection: v1.Spec.PerDeviceNodeSelection,
				PartitionTypeAttribute: v1.Spec.PartitionTypeAttribute,
			})
			out.inventory.add(name, &v1.Spec)
		}
		out.Resources.Pools[name] = rp
		out.Slices = append(out.Slices, flat...)
	}
	if len(problems) > 0 {
		return nil, &InvalidPoolError{Problems: problems}
	}
	return out, nil
}

// inventory is what the kit knows about the published devices: what each
// consumes from which counter set, and what the counter sets hold.
type inventory struct {
	consumes map[DeviceKey][]resourcev1.DeviceCounterConsumption
	sets     map[counterSetKey]map[string]resource.Quantity
}

func newInventory() inventory {
	return inventory{consumes: map[DeviceKey][]resourcev1.DeviceCounterConsumption{}, sets: map[counterSetKey]map[string]resource.Quantity{}}
}

func (inv inventory) add(pool string, spec *resourcev1.ResourceSliceSpec) {
	for _, d := range spec.Devices {
		inv.consumes[DeviceKey{pool, d.Name}] = d.ConsumesCounters
	}
	for _, cs := range spec.SharedCounters {
		m := make(map[string]resource.Quantity, len(cs.Counters))
		for name, c := range cs.Counters {
			m[name] = c.Value
		}
		inv.sets[counterSetKey{pool, cs.Name}] = m
	}
}

func (inv inventory) known(k DeviceKey) bool {
	_, ok := inv.consumes[k]
	return ok
}
