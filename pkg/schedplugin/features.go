package schedplugin

import "k8s.io/component-base/featuregate"

// Features are the kube-scheduler feature gates the plugin itself obeys;
// the allocator's own gates reach it through the State.
type Features struct {
	// BindingConditions: DRADeviceBindingConditions and
	// DRAResourceClaimDeviceStatus, both needed, as in-tree.
	BindingConditions bool
	// FilterTimeout: DRASchedulerFilterTimeout.
	FilterTimeout bool
	// PrioritizedList: DRAPrioritizedList, which the FirstFit score ranks.
	PrioritizedList bool
	// DeviceTaintRules: DRADeviceTaintRules, applied to slices before the
	// State sees them.
	DeviceTaintRules bool
	// ConsumableCapacity: DRAConsumableCapacity, for the CEL of
	// DeviceTaintRule selectors.
	ConsumableCapacity bool
}

// AllFeatures is every feature on, which is what the plugin assumes
// without a feature gate.
var AllFeatures = Features{BindingConditions: true, FilterTimeout: true, PrioritizedList: true, DeviceTaintRules: true, ConsumableCapacity: true}

// FeaturesFrom reads the gates from kube-scheduler's feature gate. A gate
// fg does not know counts as on, so that a gate removed upstream after
// graduating keeps its feature.
func FeaturesFrom(fg featuregate.FeatureGate) Features {
	if fg == nil {
		return AllFeatures
	}
	known := fg.DeepCopy().GetAll()
	on := func(name string) bool {
		if _, ok := known[featuregate.Feature(name)]; !ok {
			return true
		}
		return fg.Enabled(featuregate.Feature(name))
	}
	return Features{
		BindingConditions:  on("DRADeviceBindingConditions") && on("DRAResourceClaimDeviceStatus"),
		FilterTimeout:      on("DRASchedulerFilterTimeout"),
		PrioritizedList:    on("DRAPrioritizedList"),
		DeviceTaintRules:   on("DRADeviceTaintRules"),
		ConsumableCapacity: on("DRAConsumableCapacity"),
	}
}
