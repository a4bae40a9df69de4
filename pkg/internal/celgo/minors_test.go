// Package celgo_test holds the per-minor files of pkg/internal/celgo to
// one list of names: a minor's file may differ from another's only in its
// build tag, its doc comment and the module path it imports cel-go from,
// since Go has no way to name a package's import path once for two files.
package celgo_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// modulePaths are cel-go's module path at each minor's file.
var modulePaths = map[string]string{
	"k8s137.go": "github.com/google/cel-go",
	"k8s138.go": "cel.dev/cel-go",
}

var importLine = regexp.MustCompile(`(?m)^import up "([^"]+)"$`)

func TestMinorsNameTheSameThings(t *testing.T) {
	dirs := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		bodies := map[string]string{}
		for file, module := range modulePaths {
			data, err := os.ReadFile(filepath.Join(path, file))
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return err
			}
			src := string(data)
			m := importLine.FindStringSubmatchIndex(src)
			if m == nil {
				t.Errorf("%s: no `import up \"...\"` line", filepath.Join(path, file))
				continue
			}
			if imp := src[m[2]:m[3]]; imp != module && !strings.HasPrefix(imp, module+"/") {
				t.Errorf("%s imports %s, want a package of %s", filepath.Join(path, file), imp, module)
			}
			bodies[file] = src[m[1]:]
		}
		if len(bodies) == 0 {
			return nil
		}
		dirs++
		if len(bodies) != len(modulePaths) {
			t.Errorf("%s has files for %d of the %d minors", path, len(bodies), len(modulePaths))
			return nil
		}
		if bodies["k8s137.go"] != bodies["k8s138.go"] {
			t.Errorf("%s: k8s137.go and k8s138.go name different things after their import; keep one list", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if dirs < 8 {
		t.Errorf("checked %d packages of cel-go, want every one pkg/core/cel uses (8)", dirs)
	}
}
