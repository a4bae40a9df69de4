package reshape

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
)

// KEP-5234 limits ("Limits" and "API") that the output must respect, as
// pkg/core/validation defines them.
const (
	MaxDeviceMixins        = validation.MaxDeviceMixins
	MaxConsumptionMixins   = validation.MaxConsumptionMixins
	MaxCounterSetMixins    = validation.MaxCounterSetMixins
	MaxDeviceIncludes      = validation.MaxDeviceIncludes
	MaxCounterSetIncludes  = validation.MaxCounterSetIncludes
	MaxConsumptionIncludes = validation.MaxConsumptionIncludes
)

// Options tunes Compact. The zero value compacts everything as far as the
// KEP-5234 limits allow.
type Options struct {
	// Max* lower the limits; zero or anything above the KEP limit means
	// the KEP limit.
	MaxDeviceMixins        int
	MaxConsumptionMixins   int
	MaxCounterSetMixins    int
	MaxDeviceIncludes      int
	MaxConsumptionIncludes int
	MaxCounterSetIncludes  int

	// Skip* leave one kind of entry as it is in the flattened slice.
	SkipDevices      bool
	SkipConsumptions bool
	SkipCounterSets  bool

	// KubeVersion is the kube-apiserver minor whose admission the
	// pieces of Pool must pass; nil: the newest supported.
	KubeVersion *validation.KubeVersion
}

// admits reports whether the target kube-apiserver admits s.
func (o Options) admits(s *api.ResourceSlice) bool {
	v := validation.Newest()
	if o.KubeVersion != nil {
		v = *o.KubeVersion
	}
	return len(v.ResourceSlice(s)) == 0
}

// Stats describes one Compact call. Sizes are the compact encoding/json
// encoding of the api.ResourceSlice.
type Stats struct {
	BytesBefore       int // the input as given (mixins and all)
	BytesAfter        int // the result
	DeviceMixins      int
	ConsumptionMixins int
	CounterSetMixins  int
}

func limit(v, kep int) int {
	if v <= 0 || v > kep {
		return kep
	}
	return v
}

// Compact returns a copy of s in mixin form. It flattens s first, so mixins
// already present are replaced by ones of its own choosing, named d<n>
// (device), c<n> (counter consumption) and s<n> (counter set). When no
// mixin pays for itself the result is the flattened slice. s is not
// modified. The only error is an include of s naming no mixin.
func Compact(s *api.ResourceSlice, opts Options) (*api.ResourceSlice, Stats, error) {
	var st Stats
	before, err := json.Marshal(s)
	if err != nil {
		return nil, st, fmt.Errorf("encoding input: %w", err)
	}
	st.BytesBefore = len(before)
	flat, err := api.Flatten(s)
	if err != nil {
		return nil, st, err
	}
	flatJSON, err := json.Marshal(flat)
	if err != nil {
		return nil, st, fmt.Errorf("encoding flattened input: %w", err)
	}

	out := flat.DeepCopy()
	mixins := &api.ResourceSliceMixins{}
	firstOfAll := true
	if !opts.SkipDevices {
		mixins.Device, err = compactDevices(out, opts, &firstOfAll)
		if err != nil {
			return nil, st, err
		}
	}
	if !opts.SkipConsumptions {
		mixins.DeviceCounterConsumption, err = compactConsumptions(out, opts, &firstOfAll)
		if err != nil {
			return nil, st, err
		}
	}
	if !opts.SkipCounterSets {
		mixins.CounterSet, err = compactCounterSets(out, opts, &firstOfAll)
		if err != nil {
			return nil, st, err
		}
	}
	if len(mixins.Device)+len(mixins.DeviceCounterConsumption)+len(mixins.CounterSet) > 0 {
		out.Spec.Mixins = mixins
	}
	outJSON, err := json.Marshal(out)
	if err != nil {
		return nil, st, fmt.Errorf("encoding result: %w", err)
	}
	// The planner estimates sizes; the encoder has the last word.
	if len(outJSON) >= len(flatJSON) {
		st.BytesAfter = len(flatJSON)
		return flat, st, nil
	}
	st.BytesAfter = len(outJSON)
	st.DeviceMixins = len(mixins.Device)
	st.ConsumptionMixins = len(mixins.DeviceCounterConsumption)
	st.CounterSetMixins = len(mixins.CounterSet)
	return out, st, nil
}

// rawEntry is one map entry of owner number owner, before interning.
type rawEntry struct {
	owner int
	m     int
	key   string
	json  []byte
}

func entryKey(m int, key string, js []byte) string {
	return strconv.Itoa(m) + "\x00" + key + "\x00" + string(js)
}

// intern gives equal (map, key, encoded value) entries one id and returns
// the owners' item lists. Ids follow the sorted order of the entries so
// that the plan does not depend on Go's map iteration order.
func intern(entries []rawEntry, nOwners int) ([]item, []owner) {
	keys := make([]string, 0, len(entries))
	seen := map[string]int{}
	for _, e := range entries {
		k := entryKey(e.m, e.key, e.json)
		if _, ok := seen[k]; !ok {
			seen[k] = len(keys)
			keys = append(keys, k)
		}
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	id := make(map[string]int, len(keys))
	items := make([]item, len(keys))
	for newID, old := range order {
		id[keys[old]] = newID
	}
	owners := make([]owner, nOwners)
	for _, e := range entries {
		i := id[entryKey(e.m, e.key, e.json)]
		if items[i].json == nil {
			qk, _ := json.Marshal(e.key)
			items[i] = item{m: e.m, key: e.key, json: e.json, cost: len(qk) + 1 + len(e.json) + 1}
		}
		o := &owners[e.owner]
		o.items = append(o.items, i)
		o.left[e.m]++
	}
	for i := range owners {
		slices.Sort(owners[i].items)
	}
	return items, owners
}

// encode is the identity of a value: entries are shared only when their
// encodings are byte-equal, which is stricter than semantic equality (1Gi
// and 1073741824 stay apart) and so can never change meaning.
func encode(v any) ([]byte, error) { return json.Marshal(v) }

const (
	mapAttributes = 0
	mapCapacity   = 1
	mapCounters   = 0
)

func compactDevices(s *api.ResourceSlice, opts Options, firstOfAll *bool) ([]api.DeviceMixin, error) {
	devs := s.Spec.Devices
	// Mixins may overlap, so an entry may already be gone from a member
	// when a later mixin takes its value: read values from a copy.
	orig := s.DeepCopy().Spec.Devices
	var entries []rawEntry
	for i := range devs {
		for k, v := range devs[i].Attributes {
			js, err := encode(v)
			if err != nil {
				return nil, fmt.Errorf("spec.devices[%d].attributes[%s]: %w", i, k, err)
			}
			entries = append(entries, rawEntry{i, mapAttributes, string(k), js})
		}
		for k, v := range devs[i].Capacity {
			js, err := encode(v)
			if err != nil {
				return nil, fmt.Errorf("spec.devices[%d].capacity[%s]: %w", i, k, err)
			}
			entries = append(entries, rawEntry{i, mapCapacity, string(k), js})
		}
	}
	items, owners := intern(entries, len(devs))
	groups := plan(items, owners, costs{
		prefix:      "d",
		mapKey:      [maxMaps]int{len(`,"attributes":{}`), len(`,"capacity":{}`)},
		first:       len(`"device":[],`),
		maxIncludes: limit(opts.MaxDeviceIncludes, MaxDeviceIncludes),
		maxMixins:   limit(opts.MaxDeviceMixins, MaxDeviceMixins),
	}, firstOfAll)
	out := make([]api.DeviceMixin, 0, len(groups))
	for gi, g := range groups {
		name := "d" + strconv.Itoa(gi)
		src := &orig[g.members[0]]
		m := api.DeviceMixin{Name: name}
		for _, it := range g.items {
			k := api.QualifiedName(items[it].key)
			if items[it].m == mapAttributes {
				if m.Attributes == nil {
					m.Attributes = map[api.QualifiedName]api.DeviceAttribute{}
				}
				v := src.Attributes[k]
				m.Attributes[k] = *v.DeepCopy()
			} else {
				if m.Capacity == nil {
					m.Capacity = map[api.QualifiedName]api.DeviceCapacity{}
				}
				v := src.Capacity[k]
				m.Capacity[k] = *v.DeepCopy()
			}
		}
		for _, o := range g.members {
			d := &devs[o]
			for _, it := range g.items {
				if items[it].m == mapAttributes {
					delete(d.Attributes, api.QualifiedName(items[it].key))
				} else {
					delete(d.Capacity, api.QualifiedName(items[it].key))
				}
			}
			d.Includes = append(d.Includes, name)
		}
		out = append(out, m)
	}
	for i := range devs {
		if len(devs[i].Attributes) == 0 {
			devs[i].Attributes = nil
		}
		if len(devs[i].Capacity) == 0 {
			devs[i].Capacity = nil
		}
	}
	return out, nil
}

func compactConsumptions(s *api.ResourceSlice, opts Options, firstOfAll *bool) ([]api.DeviceCounterConsumptionMixin, error) {
	var refs []*api.DeviceCounterConsumption
	var orig []map[string]api.Counter
	var entries []rawEntry
	for i := range s.Spec.Devices {
		for j := range s.Spec.Devices[i].ConsumesCounters {
			c := &s.Spec.Devices[i].ConsumesCounters[j]
			for k, v := range c.Counters {
				js, err := encode(v)
				if err != nil {
					return nil, fmt.Errorf("spec.devices[%d].consumesCounters[%d].counters[%s]: %w", i, j, k, err)
				}
				entries = append(entries, rawEntry{len(refs), mapCounters, k, js})
			}
			refs = append(refs, c)
			orig = append(orig, maps.Clone(c.Counters))
		}
	}
	items, owners := intern(entries, len(refs))
	groups := plan(items, owners, costs{
		prefix:      "c",
		mapKey:      [maxMaps]int{len(`,"counters":{}`)},
		first:       len(`"deviceCounterConsumption":[],`),
		maxIncludes: limit(opts.MaxConsumptionIncludes, MaxConsumptionIncludes),
		maxMixins:   limit(opts.MaxConsumptionMixins, MaxConsumptionMixins),
	}, firstOfAll)
	out := make([]api.DeviceCounterConsumptionMixin, 0, len(groups))
	for gi, g := range groups {
		name := "c" + strconv.Itoa(gi)
		m := api.DeviceCounterConsumptionMixin{Name: name, Counters: takeCounters(items, g, orig[g.members[0]])}
		for _, o := range g.members {
			refs[o].Counters = dropCounters(items, g, refs[o].Counters)
			refs[o].Includes = append(refs[o].Includes, name)
		}
		out = append(out, m)
	}
	return out, nil
}

func compactCounterSets(s *api.ResourceSlice, opts Options, firstOfAll *bool) ([]api.CounterSetMixin, error) {
	sets := s.Spec.SharedCounters
	orig := s.DeepCopy().Spec.SharedCounters
	var entries []rawEntry
	for i := range sets {
		for k, v := range sets[i].Counters {
			js, err := encode(v)
			if err != nil {
				return nil, fmt.Errorf("spec.sharedCounters[%d].counters[%s]: %w", i, k, err)
			}
			entries = append(entries, rawEntry{i, mapCounters, k, js})
		}
	}
	items, owners := intern(entries, len(sets))
	groups := plan(items, owners, costs{
		prefix:      "s",
		mapKey:      [maxMaps]int{len(`,"counters":{}`)},
		first:       len(`"counterSet":[],`),
		maxIncludes: limit(opts.MaxCounterSetIncludes, MaxCounterSetIncludes),
		maxMixins:   limit(opts.MaxCounterSetMixins, MaxCounterSetMixins),
	}, firstOfAll)
	out := make([]api.CounterSetMixin, 0, len(groups))
	for gi, g := range groups {
		name := "s" + strconv.Itoa(gi)
		m := api.CounterSetMixin{Name: name, Counters: takeCounters(items, g, orig[g.members[0]].Counters)}
		for _, o := range g.members {
			sets[o].Counters = dropCounters(items, g, sets[o].Counters)
			sets[o].Includes = append(sets[o].Includes, name)
		}
		out = append(out, m)
	}
	return out, nil
}

func takeCounters(items []item, g group, from map[string]api.Counter) map[string]api.Counter {
	out := make(map[string]api.Counter, len(g.items))
	for _, it := range g.items {
		k := items[it].key
		out[k] = api.Counter{Value: from[k].Value.DeepCopy()}
	}
	return out
}

func dropCounters(items []item, g group, from map[string]api.Counter) map[string]api.Counter {
	for _, it := range g.items {
		delete(from, items[it].key)
	}
	if len(from) == 0 {
		return nil
	}
	return from
}
