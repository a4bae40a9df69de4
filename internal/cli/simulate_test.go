package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimulate runs simulate in-process and compares the output with
// testdata/<name>.golden; the workloads are seeded, so the numbers are
// fixed.
func TestSimulate(t *testing.T) {
	td := func(name string) string { return filepath.Join("internal", "cli", "testdata", "simulate", name) }
	dgx := []string{"-f", filepath.Join("examples", "dgx-h100-mixins", "resourceslices.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins", "deviceclasses.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins", "node.yaml")}
	workload := filepath.Join("examples", "dgx-h100-mixins", "workload")
	cases := []commandCase{
		{"simulate-dgx", append([]string{"simulate", "--workload", workload}, dgx...), ExitOK},
		{"simulate-dgx-json", append([]string{"simulate", "--workload", workload, "--strategy", "best-fit", "--samples", "4", "-o", "json"}, dgx...), ExitOK},
		{"simulate-dgx-summary", append([]string{"simulate", "--workload", workload, "-o", "summary"}, dgx...), ExitOK},
		{"simulate-pods", append([]string{"simulate", "--workload", td("pods.yaml"), "--strategy", "first-fit"}, dgx...), ExitOK},
		{"simulate-no-workload", append([]string{"simulate"}, dgx...), ExitUsage},
		{"simulate-bad-strategy", append([]string{"simulate", "--workload", workload, "--strategy", "worst-fit"}, dgx...), ExitUsage},
		{"simulate-bad-workload", append([]string{"simulate", "--workload", td("bad-workload.yaml")}, dgx...), ExitUsage},
		{"simulate-invalid-workload", append([]string{"simulate", "--workload", td("invalid-workload.yaml")}, dgx...), ExitUsage},
		// The nodes-needed answer for the example workload; its minimality
		// is TestNodesNeededIsMinimal's (internal/simulate).
		{"simulate-plan-dgx", []string{"simulate", "--node-template", filepath.Join("examples", "dgx-h100-mixins"), "--workload", workload, "--max-wait", "5m"}, ExitOK},
		{"simulate-plan-dgx-added", append([]string{"simulate", "--node-template", filepath.Join("examples", "dgx-h100-mixins"), "--workload", workload, "--max-wait", "5m", "--strategy", "best-fit", "-o", "json"}, dgx...), ExitOK},
		// Pods that ask for what no DGX H100 has are counted by kind
		// and left out of the sizing, which then finds an answer.
		{"simulate-plan-foreign-profiles", []string{"simulate", "--node-template", filepath.Join("examples", "dgx-h100-mixins"), "--workload", td("foreign-profiles.yaml"), "--max-wait", "5m"}, ExitOK},
		{"simulate-plan-foreign-profiles-json", []string{"simulate", "--node-template", filepath.Join("examples", "dgx-h100-mixins"), "--workload", td("foreign-profiles.yaml"), "--max-wait", "5m", "--strategy", "first-fit", "-o", "json"}, ExitOK},
		{"simulate-scale-down", []string{"simulate", "-f", td("snapshot"), "--scale-down"}, ExitOK},
		{"simulate-scale-down-with-workload", []string{"simulate", "-f", td("snapshot"), "--scale-down", "--workload", workload}, ExitUsage},
		{"simulate-plan-bad-template", []string{"simulate", "--node-template", filepath.Join("examples", "tpu-multihost"), "--workload", workload}, ExitUsage},
	}
	runCommandCases(t, cases, func(t *testing.T, tc commandCase, r result) {
		if strings.HasSuffix(tc.name, "-json") {
			var v map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
				t.Errorf("-o json is not JSON: %v", err)
			}
		}
	})
}
