package publish

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/reshape"
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
// controller; the prepare kit's inventory is read from its Resources
// (prepare.InventoryOf).
type Published struct {
	Resources resourceslice.DriverResources
	// Slices are the flattened slices as they will be stored, in
	// publishing order (names are the kit's, not the server's).
	Slices []*api.ResourceSlice
}

// Build turns a node's pool description into what the resourceslice
// controller publishes. The description is a list of ResourceSlices in
// dractl's API (KEP-5234 mixins allowed) for this driver and node; names,
// generations and resourceSliceCount are the kit's to set, the order of
// slices and devices is kept (it is the allocator's first-fit order). A
// slice's pool defaults to the node's name and its nodeName to the node.
// Pools no node owns — nodeSelector, allNodes, perDeviceNodeSelection —
// are refused: they are BuildCentral's (KEP-4815 publishes them from a
// control-plane component, which sees every node), and so is another
// node's nodeName.
//
// Every described slice passes admission as written (mixins and all),
// then is flattened — no server accepts spec.mixins yet — with counter
// sets moved into slices of their own (KEP-4815 "Limits") and devices
// split over as many slices as the v1 per-slice limits require; every
// flattened slice passes v1 admission and each pool passes pool
// validation (KEP-4815 "Validation"). Any problem refuses the whole
// description: publishing part of a pool would make it incomplete or
// invalid for the scheduler.
//
// Admission is the newest supported kube-apiserver minor's; BuildFor
// judges as a given server does.
func Build(driver, node string, desc []*api.ResourceSlice) (*Published, error) {
	return BuildFor(nil, driver, node, desc)
}

// BuildFor is Build for the kube-apiserver srv (nil: the newest supported
// minor): the slices are judged by the rules of srv.Rules, and a field of
// a flattened slice that the server's schema lacks is refused, since it
// would drop the field on write (an older server and a field added after
// it: partitionTypeAttribute before 1.37, say).
func BuildFor(srv *Server, driver, node string, desc []*api.ResourceSlice) (*Published, error) {
	if node == "" {
		return nil, errors.New("publish: Build needs the node's name; pools no node owns are BuildCentral's")
	}
	return build(srv, driver, node, desc, nil)
}

// Taints are the taints a node driver adds to its devices, by pool and
// device name; nil for none.
type Taints func(pool, device string) []api.DeviceTaint

// BuildTainted is BuildFor with taints added to the devices they name
// before anything is checked: a taint counts against v1's per-slice
// limits. A node driver publishes its devices' health so.
func BuildTainted(srv *Server, driver, node string, desc []*api.ResourceSlice, taints Taints) (*Published, error) {
	if node == "" {
		return nil, errors.New("publish: Build needs the node's name; pools no node owns are BuildCentral's")
	}
	return build(srv, driver, node, desc, taints)
}

// BuildCentral is Build for a control-plane component: every slice names
// its pool and says which nodes see it — nodeSelector, allNodes or
// perDeviceNodeSelection, the same for every slice of a pool — and none
// is a node's (nodeName is for the node's own kubelet plugin). Validation
// and flattening are Build's.
func BuildCentral(driver string, desc []*api.ResourceSlice) (*Published, error) {
	return BuildCentralFor(nil, driver, desc)
}

// BuildCentralFor is BuildCentral for the kube-apiserver srv, as BuildFor
// is Build for it.
func BuildCentralFor(srv *Server, driver string, desc []*api.ResourceSlice) (*Published, error) {
	return build(srv, driver, "", desc, nil)
}

// placement checks and defaults where a described slice's devices are
// seen: on the node (node set) or as the control plane publishes them.
func placement(s *api.ResourceSlice, node string) field.ErrorList {
	spec := field.NewPath("spec")
	perDevice := ptr.Deref(s.Spec.PerDeviceNodeSelection, false)
	central := s.Spec.NodeSelector != nil || ptr.Deref(s.Spec.AllNodes, false) || perDevice
	if node != "" {
		switch {
		case perDevice:
			return field.ErrorList{field.Forbidden(spec.Child("perDeviceNodeSelection"),
				"a kubelet plugin publishes its node's devices; a pool whose devices choose their nodes is published from the control plane (publish.StartController)")}
		case central:
			return field.ErrorList{field.Forbidden(spec, "a kubelet plugin publishes its node's devices: nodeSelector and allNodes are for pools published from the control plane (publish.StartController)")}
		case s.Spec.NodeName != nil && *s.Spec.NodeName != node:
			return field.ErrorList{field.Invalid(spec.Child("nodeName"), *s.Spec.NodeName, "a kubelet plugin publishes its own node's devices, expected "+node)}
		}
		if s.Spec.Pool.Name == "" {
			s.Spec.Pool.Name = node
		}
		s.Spec.NodeName = ptr.To(node)
		return nil
	}
	var errs field.ErrorList
	if s.Spec.Pool.Name == "" {
		errs = append(errs, field.Required(spec.Child("pool", "name"), "a pool no node owns needs a name"))
	}
	if s.Spec.NodeName != nil {
		errs = append(errs, field.Forbidden(spec.Child("nodeName"), "a node's devices are published by its kubelet plugin (driverkit.Start)"))
	} else if !central {
		errs = append(errs, field.Required(spec, "one of nodeSelector, allNodes or perDeviceNodeSelection: the nodes that see the pool"))
	}
	return errs
}

// poolPlacement is where the resourceslice controller puts nodeSelector
// and allNodes: once per pool, so every slice of a pool must agree.
func poolPlacement(slices []*api.ResourceSlice) (*corev1.NodeSelector, bool, error) {
	first := slices[0]
	for _, s := range slices[1:] {
		if ptr.Deref(s.Spec.AllNodes, false) != ptr.Deref(first.Spec.AllNodes, false) ||
			!equality.Semantic.DeepEqual(s.Spec.NodeSelector, first.Spec.NodeSelector) {
			return nil, false, fmt.Errorf("slices %s and %s: spec.nodeSelector and spec.allNodes differ; every slice of a pool is published with the same", first.Name, s.Name)
		}
	}
	return first.Spec.NodeSelector.DeepCopy(), ptr.Deref(first.Spec.AllNodes, false), nil
}

// build is BuildTainted and BuildCentralFor.
func build(srv *Server, driver, node string, desc []*api.ResourceSlice, taints Taints) (*Published, error) {
	rules := srv.rules()
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
		if errs := placement(s, node); len(errs) > 0 {
			report(where, errs)
			continue
		}
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s-%d", s.Spec.Pool.Name, i)
		}
		for j := range s.Spec.Devices {
			dev := &s.Spec.Devices[j]
			if taints == nil {
				continue
			}
			if ts := taints(s.Spec.Pool.Name, dev.Name); len(ts) > 0 {
				dev.Taints = append(slices.Clip(dev.Taints), ts...)
			}
		}
		d := pools[s.Spec.Pool.Name]
		if d == nil {
			d = &described{}
			pools[s.Spec.Pool.Name] = d
			poolOrder = append(poolOrder, s.Spec.Pool.Name)
		}
		d.slices = append(d.slices, s)
	}

	out := &Published{Resources: resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{}}}
	for _, name := range poolOrder {
		d := pools[name]
		for _, s := range d.slices {
			s.Spec.Pool.Generation, s.Spec.Pool.ResourceSliceCount = 1, int64(len(d.slices))
			report(fmt.Sprintf("pool %s slice %s", name, s.Name), rules.ResourceSlice(s))
		}
		var flat []*api.ResourceSlice
		for _, s := range d.slices {
			f, err := reshape.ForV1(s)
			if err != nil {
				problems = append(problems, fmt.Sprintf("pool %s slice %s: %v", name, s.Name, err))
				continue
			}
			flat = append(flat, f...)
		}
		for _, f := range flat {
			f.Spec.Pool.ResourceSliceCount = int64(len(flat))
			report(fmt.Sprintf("pool %s slice %s (flattened)", name, f.Name), rules.ResourceSlice(f))
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
		if len(flat) > 0 {
			var err error
			if rp.NodeSelector, rp.AllNodes, err = poolPlacement(flat); err != nil {
				problems = append(problems, fmt.Sprintf("pool %s: %v", name, err))
				continue
			}
		}
		for _, f := range flat {
			v1, err := api.ToUpstream(f)
			if err != nil {
				problems = append(problems, fmt.Sprintf("pool %s slice %s: %v", name, f.Name, err))
				continue
			}
			if errs := srv.unknownFields(v1); len(errs) > 0 {
				report(fmt.Sprintf("pool %s slice %s (flattened)", name, f.Name), errs)
				continue
			}
			rp.Slices = append(rp.Slices, resourceslice.Slice{
				Devices:                v1.Spec.Devices,
				SharedCounters:         v1.Spec.SharedCounters,
				PerDeviceNodeSelection: v1.Spec.PerDeviceNodeSelection,
				PartitionTypeAttribute: v1.Spec.PartitionTypeAttribute,
			})
		}
		if srv.separateCounterSetsRefused() && slices.ContainsFunc(flat, func(f *api.ResourceSlice) bool { return len(f.Spec.SharedCounters) > 0 }) {
			problems = append(problems, fmt.Sprintf("pool %s: kube-apiserver %s takes counter sets only in the slice of the devices that consume them (KEP-4815 before 1.%d); the kit publishes them in slices of their own, as 1.%d and newer take them",
				name, srv.Version, firstSeparateCounterSetsMinor, firstSeparateCounterSetsMinor))
		}
		out.Resources.Pools[name] = rp
		out.Slices = append(out.Slices, flat...)
	}
	if len(problems) > 0 {
		return nil, &InvalidPoolError{Problems: problems}
	}
	return out, nil
}
