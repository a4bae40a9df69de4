package validation

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// want is one expected error: its type and full field path.
type want struct {
	typ  field.ErrorType
	path string
}

func (w want) String() string { return fmt.Sprintf("%s %s", w.typ, w.path) }

func eReq(p string) want      { return want{field.ErrorTypeRequired, p} }
func eInv(p string) want      { return want{field.ErrorTypeInvalid, p} }
func eForb(p string) want     { return want{field.ErrorTypeForbidden, p} }
func eTooMany(p string) want  { return want{field.ErrorTypeTooMany, p} }
func eTooLong(p string) want  { return want{field.ErrorTypeTooLong, p} }
func eDup(p string) want      { return want{field.ErrorTypeDuplicate, p} }
func eNotFound(p string) want { return want{field.ErrorTypeNotFound, p} }
func eNotSupp(p string) want  { return want{field.ErrorTypeNotSupported, p} }

// expectErrors compares the (type, path) pairs of got with wants, in
// order: validation is deterministic, so the order is part of the contract.
func expectErrors(t *testing.T, got field.ErrorList, wants ...want) {
	t.Helper()
	gotPairs := make([]want, len(got))
	for i, e := range got {
		gotPairs[i] = want{e.Type, e.Field}
	}
	if !slices.Equal(gotPairs, wants) {
		var b strings.Builder
		for _, e := range got {
			fmt.Fprintf(&b, "\n  %s", e.Error())
		}
		t.Errorf("errors:\n got  %v\n want %v\n details:%s", gotPairs, wants, b.String())
	}
}

// expectWarnings compares the field paths of warnings with paths, in order.
func expectWarnings(t *testing.T, got []Warning, paths ...string) {
	t.Helper()
	gotPaths := make([]string, len(got))
	for i, w := range got {
		gotPaths[i] = w.Field
	}
	if !slices.Equal(gotPaths, paths) {
		t.Errorf("warnings:\n got  %q\n want %q\n details: %v", gotPaths, paths, got)
	}
}

// deepEqual is reflect.DeepEqual, chosen over a JSON comparison because it
// also sees a Quantity's internal representation.
func deepEqual(t *testing.T, a, b any) bool {
	t.Helper()
	return reflect.DeepEqual(a, b)
}
