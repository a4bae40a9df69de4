package pool

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/internal/parallel"
)

// Problem is one reason why a pool is invalid. Err's field path is relative
// to the named slice.
type Problem struct {
	Slice string
	Err   *field.Error
}

func (p Problem) String() string {
	return fmt.Sprintf("ResourceSlice %s: %s", p.Slice, p.Err.Error())
}

// InvalidError reports every problem of one pool. The allocator never uses
// part of an invalid pool (KEP-4815 §"Validation"); it reports the pool in the
// explanation of a node that does not fit, and as a fatal error only when
// an "All" request would have had to take its devices.
type InvalidError struct {
	Pool     ID
	Problems []Problem
}

func (e *InvalidError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.String()
	}
	return fmt.Sprintf("pool %s is invalid: %s", e.Pool, strings.Join(msgs, "; "))
}

// CounterSet is a counter set of the pool with its includes resolved.
type CounterSet struct {
	api.CounterSetView
	Slice *Slice
	// Index is the position in the slice's spec.sharedCounters.
	Index int
}

// CounterSets returns the pool's counter sets by name. When a name is
// defined twice the first (in slice order) is kept; Validate reports it.
// Counter sets whose includes do not resolve are left out; Validate
// reports those too.
func (p *Pool) CounterSets() map[string]CounterSet {
	out := make(map[string]CounterSet)
	for _, s := range p.Slices {
		for i := range s.Spec.SharedCounters {
			cs := &s.Spec.SharedCounters[i]
			if _, dup := out[cs.Name]; dup {
				continue
			}
			v, err := s.Mixins.CounterSet(cs)
			if err != nil {
				continue
			}
			out[cs.Name] = CounterSet{CounterSetView: v, Slice: s, Index: i}
		}
	}
	return out
}

// Validate checks the rules of KEP-4815 §"Validation" that span slices:
// device names unique in the pool, counter set names unique in the pool,
// every consumed counter set exists, every consumed counter exists in its
// set. It also reports slices of one generation that disagree on
// resourceSliceCount and includes that do not resolve, because a pool with
// either cannot be read consistently. It returns nil for a valid pool.
func (p *Pool) Validate() *InvalidError {
	var probs []Problem
	for _, s := range p.Slices {
		if c := s.Spec.Pool.ResourceSliceCount; c != p.SliceCount {
			probs = append(probs, Problem{Slice: s.Name, Err: field.Invalid(field.NewPath("spec", "pool", "resourceSliceCount"), c,
				fmt.Sprintf("other slices of pool %s generation %d declare %d", p.ID, p.Generation, p.SliceCount))})
		}
	}
	v := View{ID: p.ID, Devices: p.Slices, Counters: p.Slices}
	probs = append(probs, v.problems()...)
	if len(probs) == 0 {
		return nil
	}
	return &InvalidError{Pool: p.ID, Problems: probs}
}

// ValidateAll validates every pool like Validate, spread over the machine's
// cores: pools are independent. The result holds the error of pools[i] at
// index i (nil for a valid pool).
func ValidateAll(pools []*Pool) []*InvalidError {
	out := make([]*InvalidError, len(pools))
	parallel.For(len(pools), func(i int) { out[i] = pools[i].Validate() })
	return out
}

// View is one generation of a pool as the allocator sees it for one node.
// Upstream's allocator judges a pool by the slices the node sees, not by the
// whole pool: a problem in a slice the node cannot see does not stop
// allocation on the node.
type View struct {
	ID ID
	// Devices are the device slices the node sees; their device names must
	// be unique among them.
	Devices []*Slice
	// Counters are the slices whose counter sets the devices may consume;
	// set names must be unique among them.
	Counters []*Slice
	// Others are device slices the node does not see whose counter
	// consumption must still resolve: upstream checks them when it had to
	// look beyond the node's slices to find the pool complete.
	Others []*Slice
	// NoCounters: counters are not in use (DRAPartitionableDevices off),
	// so only device names and mixins are checked.
	NoCounters bool
}

// Validate checks the view the way upstream's allocator checks a pool
// before using it. It returns nil for a valid view.
func (v *View) Validate() *InvalidError {
	if probs := v.problems(); len(probs) > 0 {
		return &InvalidError{Pool: v.ID, Problems: probs}
	}
	return nil
}

func (v *View) problems() []Problem {
	var probs []Problem
	add := func(s *Slice, err *field.Error) { probs = append(probs, Problem{Slice: s.Name, Err: err}) }

	for _, list := range [][]*Slice{v.Counters, v.Devices, v.Others} {
		for _, s := range list {
			for _, f := range s.Unread {
				add(s, unreadField(f))
			}
		}
	}

	type place struct {
		slice string
		index int
	}
	setAt := make(map[string]place)
	sets := make(map[string]api.CounterSetView)
	for _, s := range v.Counters {
		if v.NoCounters {
			break
		}
		for i := range s.Spec.SharedCounters {
			cs := &s.Spec.SharedCounters[i]
			path := field.NewPath("spec", "sharedCounters").Index(i)
			if first, dup := setAt[cs.Name]; dup {
				add(s, field.Duplicate(path.Child("name"), fmt.Sprintf("%s (also in ResourceSlice %s spec.sharedCounters[%d])", cs.Name, first.slice, first.index)))
				continue
			}
			setAt[cs.Name] = place{s.Name, i}
			view, err := s.Mixins.CounterSet(cs)
			if err != nil {
				add(s, err.(*api.UnknownMixinError).FieldError(path))
				continue
			}
			for name, c := range view.Counters() {
				if !api.CounterInRange(c.Value) {
					add(s, counterOutOfRange(path.Child("counters").Key(name).Child("value"), c.Value))
				}
			}
			sets[cs.Name] = view
		}
	}
	n := 0
	for _, s := range v.Devices {
		n += len(s.Spec.Devices)
	}
	deviceAt := make(map[string]place, n)
	check := func(s *Slice, unique bool) {
		views := s.Mixins.Views(s.Spec.Devices)
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			// Paths are built only for problems: a valid pool of a whole
			// cluster has hundreds of thousands of devices.
			path := func() *field.Path { return field.NewPath("spec", "devices").Index(i) }
			if first, dup := deviceAt[d.Name]; dup && unique {
				add(s, field.Duplicate(path().Child("name"), fmt.Sprintf("%s (also in ResourceSlice %s spec.devices[%d])", d.Name, first.slice, first.index)))
			} else if unique {
				deviceAt[d.Name] = place{s.Name, i}
			}
			dv, err := views.Device(d)
			if err != nil {
				add(s, err.(*api.UnknownMixinError).FieldError(path()))
				continue
			}
			for name, c := range dv.Capacities() {
				if !api.QuantityInRange(c.Value) {
					add(s, outOfRange(path().Child("capacity").Key(string(name)).Child("value"), c.Value))
				}
			}
			if v.NoCounters {
				continue
			}
			for j, c := range dv.Consumptions {
				cpath := func() *field.Path { return path().Child("consumesCounters").Index(j) }
				for name, q := range c.Counters() {
					if !api.CounterInRange(q.Value) {
						add(s, counterOutOfRange(cpath().Child("counters").Key(name).Child("value"), q.Value))
					}
				}
				set, ok := sets[c.CounterSet()]
				if !ok {
					add(s, field.NotFound(cpath().Child("counterSet"), c.CounterSet()))
					continue
				}
				for name := range c.Counters() {
					if _, ok := set.Counter(name); !ok {
						add(s, field.NotFound(cpath().Child("counters").Key(name),
							fmt.Sprintf("%s (counter set %s has no such counter)", name, set.Name())))
					}
				}
			}
		}
	}
	for _, s := range v.Devices {
		check(s, true)
	}
	for _, s := range v.Others {
		check(s, false)
	}
	return probs
}

// unreadField reports a spec field the API server sent that this build's
// resource.k8s.io/v1 types could not hold (Slice.Unread).
func unreadField(path string) *field.Error {
	parts := strings.Split(path, ".")
	return field.Forbidden(field.NewPath(parts[0], parts[1:]...),
		"set on the API server but unknown to this build of dractl, which dropped it while decoding the slice: its devices cannot be read completely, so the pool is not allocated from (version skew, KEP-5234)")
}

// outOfRange reports a quantity the allocator does not compute with (see
// api.QuantityInRange). Its digits are not printed: formatting such a
// value takes as long as computing with it.
func outOfRange(path *field.Path, q resource.Quantity) *field.Error {
	return field.Invalid(path, "<out of range>", fmt.Sprintf("magnitude must be zero or between %g and %g to be allocated (approximately %g)",
		api.MinQuantity, api.MaxQuantity, q.AsApproximateFloat64()))
}

func counterOutOfRange(path *field.Path, q resource.Quantity) *field.Error {
	if !api.QuantityInRange(q) {
		return outOfRange(path, q)
	}
	return field.Invalid(path, q.String(), "counters must be between 0 and 18446744073709551615 (2^64-1) to be allocated")
}
