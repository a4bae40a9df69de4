package pool

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/api"
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
// part of an invalid pool (KEP-4815); it reports the pool in the
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

// Validate checks the rules of KEP-4815 "Validation" that span slices:
// device names unique in the pool, counter set names unique in the pool,
// every consumed counter set exists, every consumed counter exists in its
// set. It also reports slices of one generation that disagree on
// resourceSliceCount and includes that do not resolve, because a pool with
// either cannot be read consistently. It returns nil for a valid pool.
func (p *Pool) Validate() *InvalidError {
	var probs []Problem
	add := func(s *Slice, err *field.Error) { probs = append(probs, Problem{Slice: s.Name, Err: err}) }

	for _, s := range p.Slices {
		if c := s.Spec.Pool.ResourceSliceCount; c != p.SliceCount {
			add(s, field.Invalid(field.NewPath("spec", "pool", "resourceSliceCount"), c,
				fmt.Sprintf("other slices of pool %s generation %d declare %d", p.ID, p.Generation, p.SliceCount)))
		}
	}

	type place struct {
		slice string
		index int
	}
	setAt := make(map[string]place)
	for _, s := range p.Slices {
		for i := range s.Spec.SharedCounters {
			cs := &s.Spec.SharedCounters[i]
			path := field.NewPath("spec", "sharedCounters").Index(i)
			if first, dup := setAt[cs.Name]; dup {
				add(s, field.Duplicate(path.Child("name"), fmt.Sprintf("%s (also in ResourceSlice %s spec.sharedCounters[%d])", cs.Name, first.slice, first.index)))
				continue
			}
			setAt[cs.Name] = place{s.Name, i}
			if _, err := s.Mixins.CounterSet(cs); err != nil {
				add(s, err.(*api.UnknownMixinError).FieldError(path))
			}
		}
	}
	sets := p.CounterSets()

	deviceAt := make(map[string]place)
	for _, s := range p.Slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			path := field.NewPath("spec", "devices").Index(i)
			if first, dup := deviceAt[d.Name]; dup {
				add(s, field.Duplicate(path.Child("name"), fmt.Sprintf("%s (also in ResourceSlice %s spec.devices[%d])", d.Name, first.slice, first.index)))
			} else {
				deviceAt[d.Name] = place{s.Name, i}
			}
			v, err := s.Mixins.Device(d)
			if err != nil {
				add(s, err.(*api.UnknownMixinError).FieldError(path))
				continue
			}
			for j, c := range v.Consumptions {
				cpath := path.Child("consumesCounters").Index(j)
				set, ok := sets[c.CounterSet()]
				if !ok {
					add(s, field.NotFound(cpath.Child("counterSet"), c.CounterSet()))
					continue
				}
				for name := range c.Counters() {
					if _, ok := set.Counter(name); !ok {
						add(s, field.NotFound(cpath.Child("counters").Key(name),
							fmt.Sprintf("%s (counter set %s has no such counter)", name, set.Name())))
					}
				}
			}
		}
	}
	if len(probs) == 0 {
		return nil
	}
	return &InvalidError{Pool: p.ID, Problems: probs}
}
