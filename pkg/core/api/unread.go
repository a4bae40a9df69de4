package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Version skew (KEP-5234 "Version Skew Strategy"): an API server that
// serves spec.mixins (or any other spec field newer than the
// k8s.io/api/resource/v1 types this build is compiled against) sends it,
// and both decoders drop it without a word: protobuf's generated Unmarshal
// skips unknown field numbers, and JSON decoding into the typed objects
// skips unknown keys. A device read that way lacks the attributes,
// capacities and counter consumption its includes add, and allocating
// from it would decide on half the data.
//
// What survives either decoding is metadata.managedFields: the API server
// records, for every create, update and apply, the fields each manager
// set, by name, in fieldsV1 (a known field of ObjectMeta in every
// version). A slice that uses mixins always sets spec.mixins, since
// includes may only name mixins of their own slice, so a server that
// stored spec.mixins lists "f:mixins" under "f:spec" there. UnreadFields
// compares those names with the fields of the compiled types; a slice
// written while managedFields were switched off or reset carries none, and
// then nothing can be told.

// UnreadFields returns the spec fields that the managedFields entries
// record but that resource.k8s.io/v1's compiled types cannot hold, as
// field paths ("spec.mixins"), sorted and unique. Lists and maps are not
// looked into: the fields of ResourceSliceSpec that hold lists are atomic,
// so fieldsV1 never names the fields of their items.
func UnreadFields(managed []metav1.ManagedFieldsEntry) []string {
	var out []string
	for i := range managed {
		f := managed[i].FieldsV1
		raw := f.GetRawBytes()
		if len(raw) == 0 {
			continue
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(raw, &top) != nil {
			continue
		}
		if spec, ok := top["f:spec"]; ok {
			out = unread(out, "spec", spec, knownSpec())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func unread(out []string, path string, raw json.RawMessage, known *fieldTree) []string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return out
	}
	for key, sub := range fields {
		name, ok := strings.CutPrefix(key, "f:")
		if !ok {
			// ".", or keys of list items and set members.
			continue
		}
		child, ok := known.fields[name]
		if !ok {
			out = append(out, path+"."+name)
			continue
		}
		if child != nil {
			out = unread(out, path+"."+name, sub, child)
		}
	}
	return out
}

// fieldTree is the JSON field names of a struct type; a nil child is a
// field that is not a struct (or pointer to one) and is not looked into.
type fieldTree struct {
	fields map[string]*fieldTree
}

var knownSpec = sync.OnceValue(func() *fieldTree {
	return treeOf(reflect.TypeFor[resourcev1.ResourceSliceSpec]())
})

func treeOf(t reflect.Type) *fieldTree {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	tree := &fieldTree{fields: map[string]*fieldTree{}}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case name == "" && f.Anonymous:
			if sub := treeOf(f.Type); sub != nil {
				for k, v := range sub.fields {
					tree.fields[k] = v
				}
			}
		case name != "":
			tree.fields[name] = treeOf(f.Type)
		}
	}
	return tree
}
