package state

import (
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/pool"
)

// DeviceTaintRules (KEP-5055, GA in Kubernetes 1.37) taint devices without
// touching their ResourceSlices. The State applies them to every slice it
// is given, so that each of its users (the scheduler plugin, fed by
// informers; the offline verbs and the simulator, fed from files) sees
// the devices tainted alike.
//
// A rule selects devices by driver, pool and device name, each optional;
// a rule without a selector selects nothing. Every selected device gets
// the rule's taint added after its own, as kube-scheduler's slice tracker
// (k8s.io/dynamic-resource-allocation/resourceslice/tracker) adds it. The
// rules are applied in name order, so that the same rules give the same
// device the same taints in the same order wherever they are applied.

// SetTaintRule adds or replaces a DeviceTaintRule, by name, and applies it
// to the devices it selects in place of the rule it replaces. Only the
// pools of the slices either selects are rebuilt.
func (s *State) SetTaintRule(r *resourcev1.DeviceTaintRule) error {
	if r == nil || r.Name == "" {
		return fmt.Errorf("DeviceTaintRule: name is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.taintRules[r.Name]
	if s.taintRules == nil {
		s.taintRules = map[string]*resourcev1.DeviceTaintRule{}
	}
	s.taintRules[r.Name] = r
	s.retaint(old, r)
	return nil
}

// DeleteTaintRule removes a DeviceTaintRule and its taints.
func (s *State) DeleteTaintRule(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.taintRules[name]
	if !ok {
		return &NotFoundError{Kind: "DeviceTaintRule", Name: name}
	}
	delete(s.taintRules, name)
	s.retaint(old, nil)
	return nil
}

// retaint applies the rules anew to the slices that rule old or cur
// (either may be nil) selects devices of.
func (s *State) retaint(old, cur *resourcev1.DeviceTaintRule) {
	type hit struct {
		name string
		e    *sliceEntry
	}
	var hits []hit
	s.slices.freeze().each(func(name string, e *sliceEntry) {
		if selectsIn(old, e.given) || selectsIn(cur, e.given) {
			hits = append(hits, hit{name, e})
		}
	})
	if len(hits) == 0 {
		return
	}
	for _, h := range hits {
		e := s.newSliceEntry(h.e.given, h.e.s.Unread)
		s.slices.set(h.name, e)
		s.replaceSlice(e.id, h.name, e)
	}
	s.version++
}

// newSliceEntry is the State's entry for slice given: the slice with the
// taint rules' taints added to the devices they select.
func (s *State) newSliceEntry(given *api.ResourceSlice, unread []string) *sliceEntry {
	ps := pool.NewSlice(taint(given, s.sortedTaintRules()))
	ps.Unread = unread
	return &sliceEntry{s: ps, id: pool.ID{Driver: given.Spec.Driver, Pool: given.Spec.Pool.Name}, given: given}
}

// sortedTaintRules returns the rules in name order; nil when there are
// none.
func (s *State) sortedTaintRules() []*resourcev1.DeviceTaintRule {
	if len(s.taintRules) == 0 {
		return nil
	}
	out := make([]*resourcev1.DeviceTaintRule, 0, len(s.taintRules))
	for _, r := range s.taintRules {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *resourcev1.DeviceTaintRule) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// taint returns slice with the rules' taints added to the devices they
// select, in the rules' order: slice itself when no rule selects any of
// its devices, else a copy.
func taint(slice *api.ResourceSlice, rules []*resourcev1.DeviceTaintRule) *api.ResourceSlice {
	out := slice
	for _, r := range rules {
		if !selectsIn(r, slice) {
			continue
		}
		dev := r.Spec.DeviceSelector.Device
		for i := range slice.Spec.Devices {
			if dev != nil && *dev != slice.Spec.Devices[i].Name {
				continue
			}
			if out == slice {
				out = slice.DeepCopy()
			}
			d := &out.Spec.Devices[i]
			d.Taints = append(d.Taints, r.Spec.Taint)
		}
	}
	return out
}

// selectsIn reports whether rule r (nil: none) may select devices of the
// slice: its driver and pool match, and the device it names, if any, is
// one of the slice's.
func selectsIn(r *resourcev1.DeviceTaintRule, slice *api.ResourceSlice) bool {
	if r == nil || slice == nil {
		return false
	}
	sel := r.Spec.DeviceSelector
	switch {
	case sel == nil:
		return false
	case sel.Driver != nil && *sel.Driver != slice.Spec.Driver:
		return false
	case sel.Pool != nil && *sel.Pool != slice.Spec.Pool.Name:
		return false
	case sel.Device == nil:
		return len(slice.Spec.Devices) > 0
	}
	return slices.ContainsFunc(slice.Spec.Devices, func(d api.Device) bool { return d.Name == *sel.Device })
}
