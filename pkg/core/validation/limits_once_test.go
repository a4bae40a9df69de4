package validation

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// limitName is how a constant that restates an API limit is named: a
// maximum or limit of something a ResourceSlice, DeviceClass or claim
// holds. Tuning knobs (cache sizes, buffer lengths, column widths) do not
// name those things.
var limitName = regexp.MustCompile(`(?i)(max|limit).*(device|counter|attribute|capacit|taint|consumption|include|mixin|request|selector|constraint|toleration|binding|result)|(device|counter|attribute|capacit|taint|consumption|include|mixin|request|selector|constraint|toleration|binding|result).*(max|limit)`)

// TestLimitsDefinedOnce: limits.go is the one place where a limit is a
// number. Anywhere else in the repository (every module, tests included),
// a constant named like a limit must refer to limits.go, not repeat its
// value.
func TestLimitsDefinedOnce(t *testing.T) {
	values := map[int64][]string{}
	for name, v := range intConsts(t, "limits.go") {
		values[v] = append(values[v], name)
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	limits, _ := filepath.Abs("limits.go")
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || name != "." && strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || path == limits {
			return nil
		}
		checked++
		consts := intConsts(t, path)
		for _, name := range slices.Sorted(maps.Keys(consts)) {
			v := consts[name]
			if same, ok := values[v]; ok && limitName.MatchString(name) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s: %s = %d repeats a limit of pkg/core/validation/limits.go (%s); use the constant", rel, name, v, strings.Join(slices.Sorted(slices.Values(same)), ", "))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files under %s: is that the repository?", checked, root)
	}
}

// intConsts lists a file's package-level and local constants whose value
// is an integer literal.
func intConsts(t *testing.T, path string) map[string]int64 {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	ast.Inspect(f, func(n ast.Node) bool {
		g, ok := n.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			return true
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.INT {
					continue
				}
				if v, err := strconv.ParseInt(strings.ReplaceAll(lit.Value, "_", ""), 0, 64); err == nil {
					out[name.Name] = v
				}
			}
		}
		return true
	})
	return out
}
