package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// metricSources are where each component of metrics.md declares its
// metric names: string constants whose names start with "Metric".
var metricSources = map[string]string{
	"driver":    "pkg/driver/driverkit/metrics.go",
	"scheduler": "pkg/scheduler/schedplugin/metrics.go",
	"monitor":   "pkg/ops/monitor/metrics.go",
}

// TestMetricsTable: metrics.md names every metric the components declare,
// under the right component, once, and no other.
func TestMetricsTable(t *testing.T) {
	rows, err := MetricRows("metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	inTable := map[string]string{}
	for _, r := range rows {
		if _, dup := inTable[r[1]]; dup {
			t.Errorf("metrics.md lists %s twice", r[1])
		}
		inTable[r[1]] = r[0]
	}
	declared := map[string]string{}
	for component, file := range metricSources {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repoRoot, file), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Metric") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					declared[v] = component
				}
			}
			return true
		})
	}
	if len(declared) == 0 {
		t.Fatal("no metric names found in the sources")
	}
	for _, name := range slices.Sorted(maps.Keys(declared)) {
		switch c, ok := inTable[name]; {
		case !ok:
			t.Errorf("%s (%s) is not in metrics.md", name, metricSources[declared[name]])
		case c != declared[name]:
			t.Errorf("metrics.md lists %s under %s; %s declares it", name, c, metricSources[declared[name]])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(inTable)) {
		if _, ok := declared[name]; !ok {
			t.Errorf("metrics.md lists %s, which no component declares", name)
		}
	}
}
