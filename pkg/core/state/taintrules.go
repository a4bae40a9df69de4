package state

import (
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
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
	i, found := s.findRule(r.Name)
	rules := slices.Clone(s.taintRules)
	var old *resourcev1.DeviceTaintRule
	if found {
		old, rules[i] = rules[i], r
	} else {
		rules = slices.Insert(rules, i, r)
	}
	s.setRules(rules, old, r)
	return nil
}

// DeleteTaintRule removes a DeviceTaintRule and its taints.
func (s *State) DeleteTaintRule(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := s.findRule(name)
	if !found {
		return &NotFoundError{Kind: "DeviceTaintRule", Name: name}
	}
	old := s.taintRules[i]
	s.setRules(slices.Delete(slices.Clone(s.taintRules), i, i+1), old, nil)
	return nil
}

// findRule returns where the rule of that name is, or would be, in the
// sorted rules.
func (s *State) findRule(name string) (int, bool) {
	return slices.BinarySearchFunc(s.taintRules, name, func(r *resourcev1.DeviceTaintRule, n string) int { return strings.Compare(r.Name, n) })
}

// setRules replaces the rules and applies them anew to the slices that
// rule old or cur (either may be nil) selects devices of.
func (s *State) setRules(rules []*resourcev1.DeviceTaintRule, old, cur *resourcev1.DeviceTaintRule) {
	if len(rules) == 0 {
		rules = nil
	}
	s.taintRules = rules
	s.ruleGen++
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
		e := newSliceEntry(h.e.given, h.e.s.Unread, rules)
		s.slices.set(h.name, e)
		s.replaceSlice(e.id, h.name, e)
	}
	s.version++
}

// newSliceEntry is the State's entry for slice given: the slice with the
// taints of rules (in name order) added to the devices they select.
func newSliceEntry(given *api.ResourceSlice, unread []string, rules []*resourcev1.DeviceTaintRule) *sliceEntry {
	ps := pool.NewSlice(taint(given, rules))
	ps.Unread = unread
	return &sliceEntry{s: ps, id: pool.ID{Driver: given.Spec.Driver, Pool: given.Spec.Pool.Name}, given: given}
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
