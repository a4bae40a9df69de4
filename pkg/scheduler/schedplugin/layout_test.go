package schedplugin

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureListsEveryFile: docs/architecture.md's table of the
// plugin's files names each source file of the package, and no other.
func TestArchitectureListsEveryFile(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## The scheduler plugin\n")
	if !ok {
		t.Fatal("docs/architecture.md has no section \"The scheduler plugin\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var listed []string
	for _, line := range strings.Split(section, "\n") {
		if first, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |"); ok && strings.HasPrefix(line, "| `") {
			for _, m := range regexp.MustCompile("`([a-z0-9_]+\\.go)`").FindAllStringSubmatch(first, -1) {
				listed = append(listed, m[1])
			}
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && f != "doc.go" {
			sources = append(sources, f)
		}
	}
	slices.Sort(listed)
	slices.Sort(sources)
	if !slices.Equal(listed, sources) {
		t.Errorf("docs/architecture.md lists the plugin's files\n %v\nthe package has\n %v", listed, sources)
	}
}
