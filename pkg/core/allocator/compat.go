package allocator

import "slices"

// compatState is the running intersection of the compatibility groups of
// the devices drawing from one counter set (KEP-4815 follow-up,
// DRADeviceCompatibilityGroups). The first member decides whether the set
// holds only group-less devices; after that a device is admitted when its
// groups are empty exactly when all members' are, or when they intersect.
type compatState struct {
	has      bool
	allEmpty bool
	groups   []string // sorted
}

func (s compatState) admits(groups []string) bool {
	if !s.has {
		return true
	}
	if len(groups) == 0 {
		return s.allEmpty
	}
	if s.allEmpty {
		return false
	}
	return intersectSorted(s.groups, groups) != nil
}

func (s compatState) add(groups []string) compatState {
	if !s.has {
		return compatState{has: true, allEmpty: len(groups) == 0, groups: slices.Clone(groups)}
	}
	if s.allEmpty || len(groups) == 0 {
		return s
	}
	s.groups = intersectSorted(s.groups, groups)
	return s
}

// intersectSorted returns the common elements of two sorted lists, nil when
// there are none.
func intersectSorted[T interface{ ~string | ~int64 }](x, y []T) []T {
	var out []T
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			out = append(out, x[i])
			i++
			j++
		case x[i] < y[j]:
			i++
		default:
			j++
		}
	}
	return out
}
