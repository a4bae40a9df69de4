package reshape

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
)

// Pool compacts the slices of one pool and, unlike Compact, may move
// devices and counter sets between its slices. Mixins are local to a slice
// (KEP-5234), so every slice defines again the mixins its devices include;
// a pool cut for the per-slice limits of plain v1 (64 devices with
// counters, 8 counter sets) repeats those definitions in more slices than
// the mixin limits (128 devices, 32 counter sets, KEP-5234 "Limits")
// require. Pool tries every number of slices from the fewest the limits
// allow to the input's, cutting devices (and, separately, counter sets:
// a slice holds one or the other) into contiguous runs of near-equal
// length, and keeps the smallest result that passes validation.
//
// The pool means the same afterwards: the same devices and counter sets,
// each flattened as before, under the same driver, pool name, generation
// and node selection. Slice names are the input's, in input order; the
// slices no longer needed are gone and resourceSliceCount says how many
// remain. Pool repacks only a complete pool (resourceSliceCount slices
// given) whose slices differ in nothing but name and content; any other
// input is compacted slice by slice, as Compact does.
func CompactPool(pool []*api.ResourceSlice, opts Options) ([]*api.ResourceSlice, Stats, error) {
	perSlice, st, err := compactEach(pool, opts)
	if err != nil || !repackable(pool) {
		return perSlice, st, err
	}
	var devSlices, setSlices []*api.ResourceSlice
	for _, s := range pool {
		switch {
		case len(s.Spec.Devices) > 0:
			devSlices = append(devSlices, s)
		case len(s.Spec.SharedCounters) > 0:
			setSlices = append(setSlices, s)
		}
	}
	if len(devSlices)+len(setSlices) != len(pool) {
		// An empty slice carries nothing to move; keep the pool's cut.
		return perSlice, st, nil
	}
	flat := make([]*api.ResourceSlice, len(pool))
	for i, s := range pool {
		if flat[i], err = api.Flatten(s); err != nil {
			return nil, st, err
		}
	}
	var devices []api.Device
	var sets []api.CounterSet
	var devNames, setNames []string
	for i, s := range flat {
		devices = append(devices, s.Spec.Devices...)
		sets = append(sets, s.Spec.SharedCounters...)
		if len(s.Spec.Devices) > 0 {
			devNames = append(devNames, pool[i].Name)
		} else {
			setNames = append(setNames, pool[i].Name)
		}
	}
	devOut := repack(flat[0], devNames, len(devices), validation.MixinMaxDevices, opts, func(s *api.ResourceSlice, from, to int) {
		s.Spec.Devices = devices[from:to]
	})
	setOut := repack(flat[0], setNames, len(sets), validation.MixinMaxCounterSets, opts, func(s *api.ResourceSlice, from, to int) {
		s.Spec.SharedCounters = sets[from:to]
	})
	if devOut == nil || setOut == nil {
		return perSlice, st, nil
	}
	byName := map[string]*api.ResourceSlice{}
	for _, s := range append(devOut, setOut...) {
		byName[s.Name] = s
	}
	var out []*api.ResourceSlice
	var pst Stats
	for _, s := range pool {
		c, ok := byName[s.Name]
		if !ok {
			continue
		}
		c.Spec.Pool.ResourceSliceCount = int64(len(byName))
		if err := addStats(&pst, c); err != nil {
			return nil, st, err
		}
		out = append(out, c)
	}
	if pst.BytesAfter >= st.BytesAfter {
		return perSlice, st, nil
	}
	pst.BytesBefore = st.BytesBefore
	return out, pst, nil
}

// compactEach compacts every slice on its own and sums the stats.
func compactEach(pool []*api.ResourceSlice, opts Options) ([]*api.ResourceSlice, Stats, error) {
	var st Stats
	out := make([]*api.ResourceSlice, len(pool))
	for i, s := range pool {
		c, cst, err := Compact(s, opts)
		if err != nil {
			return nil, st, fmt.Errorf("slice %s: %w", s.Name, err)
		}
		out[i] = c
		st.BytesBefore += cst.BytesBefore
		st.BytesAfter += cst.BytesAfter
		st.DeviceMixins += cst.DeviceMixins
		st.ConsumptionMixins += cst.ConsumptionMixins
		st.CounterSetMixins += cst.CounterSetMixins
	}
	return out, st, nil
}

func addStats(st *Stats, s *api.ResourceSlice) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	st.BytesAfter += len(b)
	if m := s.Spec.Mixins; m != nil {
		st.DeviceMixins += len(m.Device)
		st.ConsumptionMixins += len(m.DeviceCounterConsumption)
		st.CounterSetMixins += len(m.CounterSet)
	}
	return nil
}

// repackable reports whether pool is complete and its slices differ only
// in name, devices, counter sets and mixins, so that moving content between
// them changes nothing else.
func repackable(pool []*api.ResourceSlice) bool {
	if len(pool) < 2 || int64(len(pool)) != pool[0].Spec.Pool.ResourceSliceCount {
		return false
	}
	shell := func(s *api.ResourceSlice) *api.ResourceSlice {
		c := s.DeepCopy()
		c.Name = ""
		c.Spec.Devices, c.Spec.SharedCounters, c.Spec.Mixins = nil, nil, nil
		return c
	}
	first := shell(pool[0])
	names := map[string]bool{}
	for _, s := range pool {
		if names[s.Name] || !equality.Semantic.DeepEqual(first, shell(s)) {
			return false
		}
		names[s.Name] = true
	}
	return true
}

// repack cuts n entries into k slices for every k from the fewest that
// maxPerSlice allows to len(names), compacts them and returns the smallest
// valid cut, or nil if no cut is valid. fill puts entries [from, to) into a
// slice.
func repack(shell *api.ResourceSlice, names []string, n, maxPerSlice int, opts Options, fill func(s *api.ResourceSlice, from, to int)) []*api.ResourceSlice {
	if len(names) == 0 {
		return []*api.ResourceSlice{}
	}
	var best []*api.ResourceSlice
	bestBytes := 0
	for k := (n + maxPerSlice - 1) / maxPerSlice; k <= len(names); k++ {
		var cut []*api.ResourceSlice
		bytes := 0
		for j := range k {
			s := shell.DeepCopy()
			s.Name = names[j]
			s.Spec.Devices, s.Spec.SharedCounters, s.Spec.Mixins = nil, nil, nil
			fill(s, j*n/k, (j+1)*n/k)
			c, st, err := Compact(s, opts)
			if err != nil || !opts.admits(c) {
				cut = nil
				break
			}
			cut = append(cut, c)
			bytes += st.BytesAfter
		}
		if cut != nil && (best == nil || bytes < bestBytes) {
			best, bestBytes = cut, bytes
		}
	}
	return best
}
