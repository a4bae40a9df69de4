package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDescribe runs describe in-process and compares the output with
// testdata/<name>.golden, like TestCommands.
func TestDescribe(t *testing.T) {
	td := func(name string) string { return filepath.Join("internal", "cli", "testdata", "describe", name) }
	a100 := []string{"-f", filepath.Join("examples", "a100-mig-mixins", "resourceslices.yaml"), "-f", filepath.Join("examples", "a100-mig-mixins", "deviceclasses.yaml"), "-f", td("a100-allocated.yaml")}
	tpu := []string{"-f", filepath.Join("examples", "tpu-multihost", "resourceslices.yaml"), "-f", filepath.Join("examples", "tpu-multihost", "nodes.yaml"), "-f", filepath.Join("examples", "tpu-multihost", "deviceclass.yaml"), "-f", td("tpu-allocated.yaml")}
	cases := []commandCase{
		{"describe-pool-a100", append([]string{"describe", "pool", "a100-node"}, a100...), ExitOK},
		{"describe-pool-a100-svg", append([]string{"describe", "pool", "gpu.nvidia.com/a100-node", "-o", "svg"}, a100...), ExitOK},
		// node-5 sees the pool through the 4x4 device's node selector.
		{"describe-node-tpu", append([]string{"describe", "node", "node-5"}, tpu...), ExitOK},
		{"describe-node-partitions", []string{"describe", "node", "my-node", "-f", filepath.Join("examples", "gpu-partitions")}, ExitOK},
		{"describe-unknown-pool", append([]string{"describe", "pool", "nope"}, tpu...), ExitUsage},
		{"describe-unknown-node", append([]string{"describe", "node", "node-9"}, tpu...), ExitUsage},
		{"describe-bad-kind", append([]string{"describe", "claim", "x"}, tpu...), ExitUsage},
		{"describe-bad-output", append([]string{"describe", "pool", "tpu-pool", "-o", "png"}, tpu...), ExitUsage},
	}
	runCommandCases(t, cases, func(t *testing.T, _ commandCase, r result) {
		if strings.Contains(r.stdout, "\x1b") {
			t.Error("colour escapes in output that is not a terminal")
		}
	})
}
