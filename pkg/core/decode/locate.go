package decode

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	kjson "sigs.k8s.io/json"
)

// fieldError is a problem at a path inside one object.
type fieldError struct {
	path, detail string
}

// maxFieldErrors bounds the errors reported for one object, as
// sigs.k8s.io/json bounds its strict errors.
const maxFieldErrors = 100

// strictErrors turns sigs.k8s.io/json strict errors into field errors.
func strictErrors(prefix string, errs []error, t reflect.Type, out []fieldError) []fieldError {
	for _, err := range errs {
		var fe kjson.FieldError
		if !errors.As(err, &fe) {
			out = append(out, fieldError{prefix, err.Error()})
			continue
		}
		path := joinPath(prefix, fe.FieldPath())
		detail := "unknown field"
		if strings.HasPrefix(err.Error(), "duplicate field") {
			detail = "duplicate field"
		} else if s := suggest(t, fe.FieldPath()); s != "" {
			detail += "; did you mean " + quote(s) + "?"
		}
		out = append(out, fieldError{path, detail})
	}
	return out
}

func joinPath(prefix, p string) string {
	switch {
	case prefix == "":
		return p
	case p == "":
		return prefix
	case p[0] == '[':
		return prefix + p
	default:
		return prefix + "." + p
	}
}

// locate is the slow path taken only when strict decoding failed outright
// (a value of the wrong type, a malformed quantity or time). encoding/json
// then reports the first failure only, without list indices, and a failing
// UnmarshalJSON without any path at all. locate decodes the document again
// subtree by subtree, descending only into subtrees that fail, and so finds
// every failing value with its full path, plus the unknown and duplicate
// fields of the subtrees that decode.
func locate(raw []byte, t reflect.Type, path string, out []fieldError) []fieldError {
	if len(out) >= maxFieldErrors {
		return out
	}
	v := reflect.New(t)
	strict, err := kjson.UnmarshalStrict(raw, v.Interface())
	if err == nil {
		return strictErrors(path, strict, t, out)
	}
	if hasUnmarshaler(t) {
		return append(out, fieldError{path, valueError(raw, t, err)})
	}
	switch t.Kind() {
	case reflect.Pointer:
		return locate(raw, t.Elem(), path, out)
	case reflect.Struct:
		members, ok := objectMembers(raw)
		if !ok {
			break
		}
		fields := structFields(t)
		seen := make(map[string]bool, len(members))
		for _, m := range members {
			p := joinPath(path, m.key)
			if seen[m.key] {
				out = append(out, fieldError{p, "duplicate field"})
				continue
			}
			seen[m.key] = true
			ft, ok := fields[m.key]
			if !ok {
				detail := "unknown field"
				if s := closest(m.key, fields); s != "" {
					detail += "; did you mean " + quote(s) + "?"
				}
				out = append(out, fieldError{p, detail})
				continue
			}
			out = locate(m.val, ft, p, out)
		}
		return out
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			break
		}
		elems, ok := arrayElements(raw)
		if !ok {
			break
		}
		for i, e := range elems {
			out = locate(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", out)
		}
		return out
	case reflect.Map:
		members, ok := objectMembers(raw)
		if !ok {
			break
		}
		seen := make(map[string]bool, len(members))
		for _, m := range members {
			p := joinPath(path, m.key)
			if seen[m.key] {
				out = append(out, fieldError{p, "duplicate field"})
				continue
			}
			seen[m.key] = true
			out = locate(m.val, t.Elem(), p, out)
		}
		return out
	}
	return append(out, fieldError{path, valueError(raw, t, err)})
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
)

func hasUnmarshaler(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || pt.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || pt.Implements(textUnmarshaler)
}

// valueError describes why raw cannot be decoded into t.
func valueError(raw []byte, t reflect.Type, err error) string {
	found := jsonType(raw)
	shown := string(raw)
	if len(shown) > 64 {
		shown = shown[:61] + "..."
	}
	if t == quantityType {
		if found != "string" && found != "number" {
			return "wrong type: expected a quantity (string or number), found " + found
		}
		return fmt.Sprintf("invalid quantity %s: %v", shown, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("wrong type: expected %s, found %s", expected(t), te.Value)
	}
	if hasUnmarshaler(t) {
		return fmt.Sprintf("invalid value %s: %v", shown, err)
	}
	return err.Error()
}

// expected names the JSON shape that t decodes from.
func expected(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 string"
		}
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer (" + t.Kind().String() + ")"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "non-negative integer (" + t.Kind().String() + ")"
	case reflect.Float32, reflect.Float64:
		return "number"
	default:
		return t.String()
	}
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// structFields maps the JSON member names of a struct type to field types,
// following encoding/json's rules for tags and embedded structs.
func structFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := out[name]; !dup {
				out[name] = f.Type
			}
		}
	}
	walk(t)
	fieldCache.Store(t, out)
	return out
}

// suggest finds a known field close to the last element of a strict
// error's path, walking t along the path. It is best effort: map keys
// containing dots defeat it, and then it suggests nothing.
func suggest(t reflect.Type, path string) string {
	segs := strings.Split(path, ".")
	for i, seg := range segs {
		name, _, _ := strings.Cut(seg, "[")
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Map {
			t = t.Elem()
			for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
				t = t.Elem()
			}
			continue
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
		fields := structFields(t)
		if i == len(segs)-1 {
			return closest(name, fields)
		}
		ft, ok := fields[name]
		if !ok {
			return ""
		}
		t = ft
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for range strings.Count(seg, "[") {
			if t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
				t = t.Elem()
			}
		}
	}
	return ""
}

// closest returns the field name that differs from key only in case or by
// at most two edits (fewer for short keys, where two edits reach almost
// anything), preferring the fewest edits.
func closest(key string, fields map[string]reflect.Type) string {
	best, bestDist := "", 3
	for name := range fields {
		d := distance(strings.ToLower(key), strings.ToLower(name))
		if d > 0 && 2*d >= len(key) {
			continue
		}
		if d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	return best
}

// distance is the Levenshtein distance, capped for long strings.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
