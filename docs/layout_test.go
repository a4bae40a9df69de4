package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/dractl/dractl/"

// sides are the top-level folders of pkg/ and the table of architecture.md
// that lists each one's packages.
var sides = map[string]string{
	"core":      "### Core: `pkg/core`",
	"scheduler": "### Scheduler side: `pkg/scheduler`",
	"driver":    "### Driver side: `pkg/driver`",
	"ops":       "### Operator side: `pkg/ops`",
	"internal":  "### Shared plumbing: `pkg/internal`",
}

// TestLayout holds pkg/ to the layout architecture.md describes: every
// package sits in a side's folder and in that side's table, and imports
// only its own side, pkg/core and pkg/internal (pkg/core and pkg/internal
// only themselves and each other); nothing in pkg/ imports internal/.
func TestLayout(t *testing.T) {
	data, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{} // package → the side whose table lists it
	for side, heading := range sides {
		rows := tableRows(t, string(data), heading)
		if len(rows) == 0 {
			t.Errorf("architecture.md: no table under %q", heading)
		}
		for _, row := range rows {
			if m := regexp.MustCompile("^\\| `(pkg/[^`]+)`").FindStringSubmatch(row); m != nil {
				listed[strings.TrimSuffix(m[1], "/")] = side
			}
		}
	}
	pkgs := packagesUnder(t, filepath.Join(repoRoot, "pkg"))
	if len(pkgs) < 20 {
		t.Fatalf("found %d packages under pkg/, want the whole tree", len(pkgs))
	}
	for dir, imports := range pkgs {
		side := sideOf(dir)
		if _, ok := sides[side]; !ok {
			t.Errorf("%s is in no side's folder (%v)", dir, keys(sides))
			continue
		}
		if got, ok := listedAs(listed, pkgs, dir); !ok {
			t.Errorf("%s is in no table of architecture.md (want the table %q)", dir, sides[side])
		} else if ok && got != side {
			t.Errorf("%s is listed in the %s table, want %s", dir, got, side)
		}
		for _, imp := range imports {
			rel, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if !strings.HasPrefix(rel, "pkg/") {
				t.Errorf("%s imports %s: pkg/ never imports outside pkg/", dir, imp)
				continue
			}
			if !mayImport(side, sideOf(rel)) {
				t.Errorf("%s (side %s) imports %s (side %s)", dir, side, rel, sideOf(rel))
			}
		}
	}
	for dir := range listed {
		if !hasPackages(pkgs, dir) {
			t.Errorf("architecture.md lists %s, which has no Go package", dir)
		}
	}
}

// listedAs finds the row that lists dir: its own, or that of a folder
// above it that is no package itself but groups packages (pkg/internal/celgo).
func listedAs(listed map[string]string, pkgs map[string][]string, dir string) (string, bool) {
	if side, ok := listed[dir]; ok {
		return side, true
	}
	for d := filepath.ToSlash(filepath.Dir(dir)); strings.Count(d, "/") >= 2; d = filepath.ToSlash(filepath.Dir(d)) {
		if _, isPkg := pkgs[d]; !isPkg {
			if side, ok := listed[d]; ok {
				return side, true
			}
		}
	}
	return "", false
}

func hasPackages(pkgs map[string][]string, dir string) bool {
	for d := range pkgs {
		if d == dir || strings.HasPrefix(d, dir+"/") {
			return true
		}
	}
	return false
}

func sideOf(dir string) string {
	parts := strings.Split(dir, "/")
	if len(parts) < 3 {
		return ""
	}
	return parts[1]
}

func mayImport(from, to string) bool {
	switch {
	case to == from, to == "internal":
		return true
	case to == "core":
		return true
	}
	return false
}

// packagesUnder returns, for each directory with non-test Go files, the
// module-relative path and the imports of those files.
func packagesUnder(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		if out[rel] == nil {
			out[rel] = []string{}
		}
		for _, s := range f.Imports {
			p, _ := strconv.Unquote(s.Path.Value)
			out[rel] = append(out[rel], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
