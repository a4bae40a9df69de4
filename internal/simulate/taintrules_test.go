package simulate

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestTaintRulesKeepDevicesUnused: the simulator's States apply the
// cluster's DeviceTaintRules as the scheduler plugin's does: with every
// GPU of the driver tainted NoSchedule, no pod of the example workload is
// placed; without the rule, some are.
func TestTaintRulesKeepDevicesUnused(t *testing.T) {
	base, tmpl, s := exampleDGX(t)
	c, err := tmpl.with(base, 2)
	if err != nil {
		t.Fatal(err)
	}
	run := func() *Result {
		t.Helper()
		res, err := Run(context.Background(), c, s, Options{Samples: 2})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(); res.Placed == 0 {
		t.Fatalf("no pod placed without a rule: %+v", res)
	}
	c.TaintRules = []*resourcev1.DeviceTaintRule{{
		ObjectMeta: metav1.ObjectMeta{Name: "maintenance"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.nvidia.com")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}}
	if res := run(); res.Placed != 0 || res.Unschedulable == 0 {
		t.Errorf("with every GPU tainted: %d placed, %d unschedulable; want none placed", res.Placed, res.Unschedulable)
	}
}
