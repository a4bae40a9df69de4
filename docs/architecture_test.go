// Package docs holds the project's documentation; its test keeps the
// tables of architecture.md true to the code.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is where the paths of architecture.md start.
const repoRoot = ".."

// TestArchitectureTables checks the tables of architecture.md that name
// code: in every row of "Rules and where they live" and "Pool types and
// their lifetimes", each backquoted path exists, and each backquoted
// identifier is declared (as a type, function, method, constant, variable
// or struct field) in a file or package that the same row names, so that a
// rename or a move the table does not follow fails here.
func TestArchitectureTables(t *testing.T) {
	data, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, heading := range []string{"## Rules and where they live", "## Pool types and their lifetimes"} {
		rows := tableRows(t, string(data), heading)
		if len(rows) == 0 {
			t.Errorf("architecture.md: no table under %q", heading)
		}
		for _, row := range rows {
			checkRow(t, heading, row)
		}
	}
}

// tableRows returns the body rows of the first table after heading.
func tableRows(t *testing.T, doc, heading string) []string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return nil
	}
	var rows []string
	inTable := false
	for _, line := range strings.Split(doc[i+len(heading)+2:], "\n") {
		switch {
		case strings.HasPrefix(line, "|"):
			inTable = true
			if !strings.HasPrefix(line, "| ---") && !strings.HasPrefix(line, "|---") {
				rows = append(rows, line)
			}
		case inTable:
			return rows[1:] // the first row is the header
		case strings.HasPrefix(line, "## "):
			return nil
		}
	}
	if len(rows) == 0 {
		return nil
	}
	return rows[1:]
}

var backquoted = regexp.MustCompile("`([^`]+)`")

func checkRow(t *testing.T, heading, row string) {
	var places, names []string
	for _, m := range backquoted.FindAllStringSubmatch(row, -1) {
		tok := m[1]
		switch {
		case strings.Contains(tok, "/") || strings.HasSuffix(tok, ".go"):
			places = append(places, tok)
		case regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`).MatchString(tok):
			names = append(names, tok)
		}
	}
	declared := map[string]bool{}
	// packages are the declarations of the packages the places are in,
	// by package name, for qualified names (pool.Of).
	packages := map[string]map[string]bool{}
	var dirs []string
	for _, p := range places {
		path := filepath.Join(repoRoot, p)
		if strings.HasSuffix(p, ".go") && !strings.Contains(p, "/") {
			// A bare file name is in a package the row named before it.
			path = ""
			for _, d := range dirs {
				if _, err := os.Stat(filepath.Join(repoRoot, d, p)); err == nil {
					path = filepath.Join(repoRoot, d, p)
				}
			}
			if path == "" {
				t.Errorf("%s: %q: no file %s in %v", heading, row, p, dirs)
				continue
			}
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %q: %s does not exist", heading, row, p)
			continue
		}
		dir := filepath.Dir(path)
		files := []string{path}
		if fi.IsDir() {
			dir = path
			dirs = append(dirs, p)
			files = goFiles(dir)
		}
		for _, f := range files {
			declarations(t, f, declared)
		}
		if pkg := filepath.Base(dir); packages[pkg] == nil {
			packages[pkg] = map[string]bool{}
			for _, f := range goFiles(dir) {
				declarations(t, f, packages[pkg])
			}
		}
	}
	for _, n := range names {
		if declared[n] {
			continue
		}
		if q, name, ok := strings.Cut(n, "."); ok && packages[q][name] {
			continue
		}
		t.Errorf("%s: %q: %s is declared in none of %v", heading, row, n, places)
	}
}

// goFiles lists a package directory's Go files, tests included: a row
// may name the test that checks its rule.
func goFiles(dir string) []string {
	all, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return all
}

// declarations adds the names file declares at top level, its methods as
// Type.Method and the fields of its structs as Type.Field.
func declarations(t *testing.T, file string, into map[string]bool) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("%s: %v", file, err)
		return
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			into[d.Name.Name] = true
			if d.Recv != nil && len(d.Recv.List) == 1 {
				if recv := receiverName(d.Recv.List[0].Type); recv != "" {
					into[recv+"."+d.Name.Name] = true
				}
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					into[s.Name.Name] = true
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fld := range st.Fields.List {
							for _, n := range fld.Names {
								into[s.Name.Name+"."+n.Name] = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						into[n.Name] = true
					}
				}
			}
		}
	}
}

func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
