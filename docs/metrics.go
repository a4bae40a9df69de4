// Package docs holds the project's documentation, and what tests read of
// it: the table of metrics.md (MetricRows).
package docs

import (
	"os"
	"strings"
)

// MetricRows reads the table of metrics.md at path: component and metric
// name of each row, in order. docs' test holds the table to the code, the
// e2e test of every metric scrapes each row.
func MetricRows(path string) ([][2]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[2]), "`dractl_") {
			continue
		}
		out = append(out, [2]string{strings.TrimSpace(cells[1]), strings.Trim(strings.TrimSpace(cells[2]), "`")})
	}
	return out, nil
}
