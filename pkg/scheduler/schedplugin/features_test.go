package schedplugin

import (
	"testing"

	"k8s.io/component-base/featuregate"

	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/features"
)

func TestFeaturesFromKubeSchedulerGates(t *testing.T) {
	fg := featuregate.NewFeatureGate()
	spec := featuregate.FeatureSpec{Default: true, PreRelease: featuregate.Beta}
	coretest.Must(t, fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		"DRAPartitionableDevices": spec, "DRADeviceBindingConditions": spec, "DRAResourceClaimDeviceStatus": spec,
		"DRASchedulerFilterTimeout": spec, "DRAPrioritizedList": spec, "DRAWorkloadResourceClaims": spec,
		"DRAExtendedResource": spec,
	}))
	coretest.Must(t, fg.SetFromMap(map[string]bool{"DRAPartitionableDevices": false, "DRAResourceClaimDeviceStatus": false, "DRASchedulerFilterTimeout": false, "DRAWorkloadResourceClaims": false, "DRAExtendedResource": false}))
	got := FeaturesFrom(fg)
	if got.Allocation.Enabled(features.PartitionableDevices) {
		t.Error("DRAPartitionableDevices=false did not reach the allocator")
	}
	if !got.Allocation.Enabled(features.AdminAccess) || !got.DeviceTaintRules {
		t.Error("gates the feature gate does not know must count as on")
	}
	if got.BindingConditions {
		t.Error("binding conditions need DRAResourceClaimDeviceStatus too")
	}
	if got.FilterTimeout || !got.PrioritizedList || got.WorkloadResourceClaims || got.ExtendedResource {
		t.Errorf("plugin gates %+v", got)
	}
	if FeaturesFrom(nil) != AllFeatures {
		t.Error("no feature gate means every feature")
	}
}
