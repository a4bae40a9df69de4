package cel

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestCompile(t *testing.T) {
	c := NewCompiler()
	tests := []struct {
		name, expr string
		wantKind   ErrorKind
		wantErr    []string // substrings of Detail; none means success
	}{
		{name: "bool", expr: `device.driver == "x"`},
		{name: "dyn attribute is accepted", expr: `device.attributes["x"].flag`},
		{name: "allowMultipleAllocations", expr: `device.allowMultipleAllocations`},
		{name: "quantity library", expr: `device.capacity["x"].memory.compareTo(quantity("1Gi")) > 0`},
		{name: "semver library", expr: `device.attributes["x"].v.isGreaterThan(semver("1.0.0")) && isSemver("1.0.0")`},
		{name: "kubernetes lists library", expr: `[3, 1].isSorted() == false && [1, 2].indexOf(2) == 1`},
		{name: "ext lists", expr: `lists.range(3).size() == 3`},
		{name: "ext strings", expr: `"a,b".split(",").size() == 2`},
		{name: "regex", expr: `"abc".matches("^a")`},
		{name: "url library", expr: `isURL("https://example.com")`},
		{name: "ip library", expr: `isIP("10.0.0.1")`},
		{name: "cel.bind", expr: `cel.bind(a, device.attributes["x"], has(a.y))`},
		{name: "two-variable comprehension", expr: `device.attributes["x"].all(k, v, k != "")`},

		{name: "syntax error", expr: `device.driver ==`, wantKind: KindInvalid,
			wantErr: []string{"compilation failed: ", "Syntax error", "<input>:1:"}},
		{name: "undeclared variable", expr: `dev.driver == "x"`, wantKind: KindInvalid,
			wantErr: []string{"compilation failed: ", "undeclared reference to 'dev'"}},
		{name: "unknown field", expr: `device.name == "x"`, wantKind: KindInvalid,
			wantErr: []string{"undefined field 'name'"}},
		{name: "int result", expr: `1 + 1`, wantKind: KindInvalid,
			wantErr: []string{"must evaluate to bool or the unknown type, not int"}},
		{name: "string result", expr: `device.driver`, wantKind: KindInvalid,
			wantErr: []string{"not string"}},
		{name: "quantity result", expr: `device.capacity["x"].memory`, wantKind: KindInvalid,
			wantErr: []string{"not kubernetes.Quantity"}},
		{name: "map result", expr: `device.attributes["x"]`, wantKind: KindInvalid,
			wantErr: []string{"not map(string, dyn)"}},
		{name: "bad regex literal", expr: `"a".matches("[")`, wantKind: KindInvalid,
			wantErr: []string{"compilation failed: "}},
		// Four nested comprehensions over 32-entry maps: about 32^4
		// iterations in the worst case, far above 1,000,000.
		{name: "too expensive", wantKind: KindTooComplex,
			expr:    `device.attributes.all(d, device.attributes[d].all(k, device.attributes.all(e, device.attributes[e].all(l, k == l))))`,
			wantErr: []string{"too complex, exceeds cost limit", "limit 1000000"}},
		// String functions on attribute values are bounded by the 64-byte
		// limit; the same nesting with two levels is fine.
		{name: "nested but bounded", expr: `device.attributes.all(d, device.attributes[d].all(k, k.startsWith("a")))`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := c.Compile(tc.expr)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				if p.Expression() != tc.expr {
					t.Fatalf("Expression() = %q, want %q", p.Expression(), tc.expr)
				}
				if p.EstimatedCost() > MaxCost {
					t.Fatalf("EstimatedCost() = %d above MaxCost for an accepted program", p.EstimatedCost())
				}
				return
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *CompileError", err, err)
			}
			if ce.Kind != tc.wantKind || ce.Expression != tc.expr {
				t.Fatalf("got kind %d for %q, want kind %d for %q", ce.Kind, ce.Expression, tc.wantKind, tc.expr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(ce.Detail, w) {
					t.Errorf("Detail %q does not contain %q", ce.Detail, w)
				}
			}
			if p != nil {
				t.Errorf("got a program along with the error")
			}
		})
	}
}

func TestCompileErrorFieldError(t *testing.T) {
	path := field.NewPath("spec", "selectors").Index(0).Child("cel", "expression")
	tests := []struct {
		kind ErrorKind
		want field.ErrorType
	}{
		{KindInvalid, field.ErrorTypeInvalid},
		{KindTooComplex, field.ErrorTypeForbidden},
		{KindInternal, field.ErrorTypeInternal},
	}
	for _, tc := range tests {
		e := &CompileError{Expression: "x", Kind: tc.kind, Detail: "what went wrong"}
		fe := e.FieldError(path)
		if fe.Type != tc.want || fe.Field != path.String() || !strings.Contains(fe.Error(), "what went wrong") {
			t.Errorf("kind %d: got %v (%s), want type %s at %s", tc.kind, fe, fe.Type, tc.want, path)
		}
		if tc.kind == KindInvalid && fe.BadValue != "x" {
			t.Errorf("Invalid must carry the expression as value, got %v", fe.BadValue)
		}
	}
}

func TestCache(t *testing.T) {
	c := NewCompiler(WithCacheSize(2))
	a1, err := c.Compile(`device.driver == "a"`)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Compile(`device.driver == "a"`)
	if a1 != a2 {
		t.Fatal("second Compile of the same expression did not return the cached program")
	}
	_, err1 := c.Compile(`1`)
	_, err2 := c.Compile(`1`)
	if err1 == nil || err1 != err2 {
		t.Fatalf("invalid expressions: errors %v and %v, want the same cached error", err1, err2)
	}
	// Two more entries push the first one out of a cache of two.
	if _, err := c.Compile(`device.driver == "b"`); err != nil {
		t.Fatal(err)
	}
	a3, _ := c.Compile(`device.driver == "a"`)
	if a3 == a1 {
		t.Fatal("cache of size 2 still holds the least recently used of three entries")
	}
}

func TestCompileConcurrent(t *testing.T) {
	c := NewCompiler()
	exprs := []string{`device.driver == "a"`, `device.driver == "b"`, `device.allowMultipleAllocations`}
	got := make([][]*Program, len(exprs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 8 {
		for j, e := range exprs {
			wg.Go(func() {
				p, err := c.Compile(e)
				if err != nil {
					t.Errorf("goroutine %d: %v", i, err)
					return
				}
				mu.Lock()
				got[j] = append(got[j], p)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for j := range exprs {
		for _, p := range got[j] {
			if p != got[j][0] {
				t.Fatalf("%q was compiled more than once", exprs[j])
			}
		}
	}
}

func TestDefault(t *testing.T) {
	if Default() != Default() {
		t.Fatal("Default returns a new Compiler on every call")
	}
}
