package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dractl/dractl/pkg/core/allocator"
)

// TestTaintsAreCounted: a rule that taints a whole pool is a count per
// taint with a few devices named, not one entry per device.
func TestTaintsAreCounted(t *testing.T) {
	r := allocator.RequestExplanation{Request: "gpu", Rejected: map[allocator.Reason]int{allocator.ReasonTaint: 10_001}, Taints: map[string]string{}}
	for i := range 10_000 {
		r.Taints[fmt.Sprintf("gpu.example.com/pool/gpu-%05d", i)] = "example.com/maintenance:NoSchedule"
	}
	r.Taints["gpu.example.com/pool/spare"] = "example.com/unhealthy=ecc:NoExecute"
	got := rejections(r)
	want := "Taint=10001 (example.com/maintenance:NoSchedule on 10,000 devices, e.g. gpu.example.com/pool/gpu-00000, gpu.example.com/pool/gpu-00001, gpu.example.com/pool/gpu-00002; " +
		"example.com/unhealthy=ecc:NoExecute on 1 device: gpu.example.com/pool/spare)"
	if got != want {
		t.Errorf("rejections:\n got %.300s (%d bytes)\nwant %s", got, len(got), want)
	}
	if strings.Count(got, "gpu-0") > taintExamples {
		t.Errorf("more than %d devices named for one taint", taintExamples)
	}
}
