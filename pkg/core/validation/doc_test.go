package validation

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"testing"
)

// TestDocNamesLimits: the package documentation names the limits and
// leaves their values to limits.go, so every limit it names must be a
// constant declared there; a renamed constant would otherwise leave the
// table naming nothing.
func TestDocNamesLimits(t *testing.T) {
	fset := token.NewFileSet()
	limits, err := parser.ParseFile(fset, "limits.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	ast.Inspect(limits, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for _, id := range vs.Names {
				declared[id.Name] = true
			}
		}
		return true
	})
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`\b(?:Mixin)?Max[A-Z][A-Za-z]*\b`).FindAllString(string(doc), -1)
	if len(names) < 10 {
		t.Fatalf("doc.go names %d limits (%v); the table of slices with mixins is gone or reworded", len(names), names)
	}
	for _, n := range names {
		if !declared[n] {
			t.Errorf("doc.go names %s, which limits.go does not declare", n)
		}
	}
}
