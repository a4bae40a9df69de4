package decode

import (
	"errors"
	"slices"
)

// objectKey identifies an object the way the API server does: by group,
// kind, namespace and name. The version does not count (a v1beta1 and a v1
// ResourceSlice of one name are the same object). Namespaced objects
// without a namespace were put in "default" by normalize; for kinds dractl
// does not judge the scope is unknown, and an empty namespace is taken to
// be "default" too, which is where kubectl would create a namespaced one.
type objectKey struct {
	group, kind, namespace, name string
}

func keyOf(o *Object) objectKey {
	ns := o.Namespace
	if ns == "" && lookupKind(o.APIVersion, o.Kind) == nil {
		ns = "default"
	}
	return objectKey{groupOf(o.APIVersion), o.Kind, ns, o.Name}
}

// rejectDuplicates keeps the first of objects that the API server would
// take for one object, and reports every later one as an error naming both
// places: applied together, the later would silently replace the earlier.
func rejectDuplicates(objs []Object, err error) ([]Object, error) {
	first := make(map[objectKey]int, len(objs))
	var dups Errors
	keep := objs[:0:0]
	for i := range objs {
		k := keyOf(&objs[i])
		if j, seen := first[k]; seen {
			dups = append(dups, &Error{Source: objs[i].Source, Kind: objs[i].Kind, Name: objs[i].Name,
				Detail: "duplicate object: " + describe(&objs[j]) + " is already defined at " + objs[j].Source.String()})
			continue
		}
		first[k] = i
		keep = append(keep, objs[i])
	}
	if len(dups) == 0 {
		return objs, err
	}
	var errs Errors
	if err != nil && !errors.As(err, &errs) {
		return keep, err
	}
	// Keep input order: files in the order they were read, then document
	// and item.
	rank := map[string]int{}
	for _, o := range objs {
		if _, ok := rank[o.Source.File]; !ok {
			rank[o.Source.File] = len(rank)
		}
	}
	for _, e := range errs {
		if _, ok := rank[e.Source.File]; !ok {
			rank[e.Source.File] = len(rank)
		}
	}
	errs = append(slices.Clone(errs), dups...)
	slices.SortStableFunc(errs, func(a, b *Error) int {
		if c := rank[a.Source.File] - rank[b.Source.File]; c != 0 {
			return c
		}
		if a.Source.Doc != b.Source.Doc {
			return a.Source.Doc - b.Source.Doc
		}
		return a.Source.Item - b.Source.Item
	})
	return keep, errs
}

func describe(o *Object) string {
	s := o.Kind + " " + o.Name
	if o.Namespace != "" {
		s += " in namespace " + o.Namespace
	}
	return s
}
