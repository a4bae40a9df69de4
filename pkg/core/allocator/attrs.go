package allocator

import (
	"slices"
	"strings"

	"github.com/dractl/dractl/pkg/core/api"
)

// attrVal is an attribute as a set of values, which is how upstream
// compares attributes once list-type attributes exist: a scalar is a set of
// one, two values match when their sets intersect. Values of different
// kinds never match.
type attrVal struct {
	kind uint8
	// list: the value came from a list field. Without
	// DRAListTypeAttributes upstream compares scalars only, and a list
	// value matches nothing.
	list bool
	ints []int64  // int and bool (0/1) values, sorted
	strs []string // string and version values, sorted
}

const (
	// kindNone is an attribute that is present with no value set. It
	// matches nothing; without DRAListTypeAttributes it still counts as
	// present.
	kindNone uint8 = iota
	kindInt
	kindBool
	kindString
	kindVersion
)

// absentAttr marks "looked up, not there" so the lookup is not repeated.
var absentAttr = &attrVal{}

func (v *attrVal) intersect(o *attrVal) *attrVal {
	if v.kind != o.kind {
		return nil
	}
	switch v.kind {
	case kindInt, kindBool:
		if r := intersectSorted(v.ints, o.ints); r != nil {
			return &attrVal{kind: v.kind, ints: r}
		}
	case kindString, kindVersion:
		if r := intersectSorted(v.strs, o.strs); r != nil {
			return &attrVal{kind: v.kind, strs: r}
		}
	}
	return nil
}

// overlaps is intersect without building the result, for the hot path.
func (v *attrVal) overlaps(o *attrVal) bool {
	if v.kind != o.kind {
		return false
	}
	if v.kind == kindString || v.kind == kindVersion {
		return sortedOverlap(v.strs, o.strs)
	}
	return sortedOverlap(v.ints, o.ints)
}

func sortedOverlap[T interface{ ~string | ~int64 }](x, y []T) bool {
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			return true
		case x[i] < y[j]:
			i++
		default:
			j++
		}
	}
	return false
}

// newAttrVal follows upstream's precedence: list values before scalars, in
// the order int, bool, string, version. An attribute without a value (or
// with only empty lists) is kindNone.
func newAttrVal(a api.DeviceAttribute) *attrVal {
	switch {
	case len(a.IntValues) > 0:
		return &attrVal{kind: kindInt, list: true, ints: sortedSet(a.IntValues)}
	case len(a.BoolValues) > 0:
		b := make([]int64, len(a.BoolValues))
		for i, x := range a.BoolValues {
			if x {
				b[i] = 1
			}
		}
		return &attrVal{kind: kindBool, list: true, ints: sortedSet(b)}
	case len(a.StringValues) > 0:
		return &attrVal{kind: kindString, list: true, strs: sortedSet(a.StringValues)}
	case len(a.VersionValues) > 0:
		return &attrVal{kind: kindVersion, list: true, strs: sortedSet(a.VersionValues)}
	case a.IntValue != nil:
		return &attrVal{kind: kindInt, ints: []int64{*a.IntValue}}
	case a.BoolValue != nil:
		var x int64
		if *a.BoolValue {
			x = 1
		}
		return &attrVal{kind: kindBool, ints: []int64{x}}
	case a.StringValue != nil:
		return &attrVal{kind: kindString, strs: []string{*a.StringValue}}
	case a.VersionValue != nil:
		return &attrVal{kind: kindVersion, strs: []string{*a.VersionValue}}
	}
	return &attrVal{kind: kindNone}
}

func sortedSet[T interface{ ~string | ~int64 }](in []T) []T {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// attr returns device d's value of the constraint's attribute, nil if it
// has none. As upstream, "<driver domain>/<id>" also finds the unqualified
// id.
func (cs *constraintState) attr(d *devInfo) *attrVal {
	var col *attrColumn
	for i := range cs.cols {
		if cs.cols[i].t == d.t {
			col = cs.cols[i].col
			break
		}
	}
	if col == nil {
		col = d.t.attrColumn(cs.name)
		cs.cols = append(cs.cols, tableAttr{t: d.t, col: col})
	}
	slot := &(*col)[d.idx]
	if v := slot.Load(); v != nil {
		if v == absentAttr {
			return nil
		}
		return v
	}
	v := absentAttr
	if d.viewErr == nil {
		if at, ok := d.view.Attribute(api.QualifiedName(cs.name)); ok {
			v = newAttrVal(at)
		} else if i := strings.Index(cs.name, "/"); i >= 0 && cs.name[:i] == d.t.p.Driver {
			if at, ok := d.view.Attribute(api.QualifiedName(cs.name[i+1:])); ok {
				v = newAttrVal(at)
			}
		}
	}
	slot.Store(v)
	if v == absentAttr {
		return nil
	}
	return v
}

// withoutBuild is a version value with the build metadata of its versions
// dropped: semver precedence, which 1.38 compares by, ignores it (semver
// 2.0.0 item 10). Versions without any, the common case, return v itself.
func (v *attrVal) withoutBuild() *attrVal {
	if !slices.ContainsFunc(v.strs, func(s string) bool { return strings.Contains(s, "+") }) {
		return v
	}
	out := &attrVal{kind: v.kind, list: v.list, strs: make([]string, len(v.strs))}
	for i, s := range v.strs {
		out.strs[i], _, _ = strings.Cut(s, "+")
	}
	out.strs = sortedSet(out.strs)
	return out
}
