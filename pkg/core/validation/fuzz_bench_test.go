package validation

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestLimitsMatchUpstream pins the limits that k8s.io/api also defines, so
// that a dependency bump that changes one of them is noticed.
func TestLimitsMatchUpstream(t *testing.T) {
	pairs := []struct {
		name       string
		ours, them int
	}{
		{"DriverNameMaxLength", DriverNameMaxLength, resourcev1.DriverNameMaxLength},
		{"PoolNameMaxLength", PoolNameMaxLength, resourcev1.PoolNameMaxLength},
		{"QualifiedNameMaxDomainLength", QualifiedNameMaxDomainLength, resourcev1.DeviceMaxDomainLength},
		{"QualifiedNameMaxIDLength", QualifiedNameMaxIDLength, resourcev1.DeviceMaxIDLength},
		{"AttributeValueMaxLength", AttributeValueMaxLength, resourcev1.DeviceAttributeMaxValueLength},
		{"MaxDevices", MaxDevices, resourcev1.ResourceSliceMaxDevices},
		{"MaxDevicesWithAdvancedFeatures", MaxDevicesWithAdvancedFeatures, resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures},
		{"MaxAttributesAndCapacitiesPerDevice", MaxAttributesAndCapacitiesPerDevice, resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice},
		{"MaxAttributeValuesPerDevice", MaxAttributeValuesPerDevice, resourcev1.ResourceSliceMaxAttributeValuesPerDevice},
		{"MaxTaintsPerDevice", MaxTaintsPerDevice, resourcev1.DeviceTaintsMaxLength},
		{"MaxBindingConditions", MaxBindingConditions, resourcev1.BindingConditionsMaxSize},
		{"MaxBindingFailureConditions", MaxBindingFailureConditions, resourcev1.BindingFailureConditionsMaxSize},
		{"MaxCounterSets", MaxCounterSets, resourcev1.ResourceSliceMaxCounterSets},
		{"MaxCountersPerCounterSet", MaxCountersPerCounterSet, resourcev1.ResourceSliceMaxCountersPerCounterSet},
		{"MaxConsumptionsPerDevice", MaxConsumptionsPerDevice, resourcev1.ResourceSliceMaxDeviceCounterConsumptionsPerDevice},
		{"MaxCountersPerConsumption", MaxCountersPerConsumption, resourcev1.ResourceSliceMaxCountersPerDeviceCounterConsumption},
		{"MaxCompatibilityGroups", MaxCompatibilityGroups, resourcev1.DeviceCompatibilityGroupsMaxSize},
		{"MaxRequests", MaxRequests, resourcev1.DeviceRequestsMaxSize},
		{"MaxSubRequests", MaxSubRequests, resourcev1.FirstAvailableDeviceRequestMaxSize},
		{"MaxSelectors", MaxSelectors, resourcev1.DeviceSelectorsMaxSize},
		{"MaxConstraints", MaxConstraints, resourcev1.DeviceConstraintsMaxSize},
		{"MaxConfigs", MaxConfigs, resourcev1.DeviceConfigMaxSize},
		{"MaxTolerations", MaxTolerations, resourcev1.DeviceTolerationsMaxLength},
		{"MaxDerivedAttributes", MaxDerivedAttributes, resourcev1.DeviceDerivedAttributesMaxSize},
		{"MaxDerivedAttributesCost", MaxDerivedAttributesCost, resourcev1.DeviceClaimDerivedAttributeCELMaxCost},
		{"MaxAllocationResults", MaxAllocationResults, resourcev1.AllocationResultsMaxSize},
		{"CELExpressionMaxLength", CELExpressionMaxLength, resourcev1.CELSelectorExpressionMaxLength},
		{"CELExpressionMaxCost", CELExpressionMaxCost, resourcev1.CELSelectorExpressionMaxCost},
		{"OpaqueParametersMaxLength", OpaqueParametersMaxLength, resourcev1.OpaqueParametersMaxLength},
	}
	for _, p := range pairs {
		if p.ours != p.them {
			t.Errorf("%s = %d, k8s.io/api/resource/v1 says %d", p.name, p.ours, p.them)
		}
	}
}

// FuzzFastNameChecks holds the hand-written fast paths to the apimachinery
// regular expressions they stand in for.
func FuzzFastNameChecks(f *testing.F) {
	for _, s := range []string{"", "a", "a-b", "-a", "a-", "A", "a.b", "a..b", "a.-b", "_x", "x_1", "1x", "gpu.example.com",
		"GPU.Example.com", strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a.", 126) + "a", "a\u00e9", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isDNSLabelFast(s), len(validation.IsDNS1123Label(s)) == 0; got != want {
			t.Errorf("isDNSLabelFast(%q) = %v, apimachinery says %v", s, got, want)
		}
		if got, want := isDNSSubdomainFast(s, false), len(validation.IsDNS1123Subdomain(s)) == 0; got != want {
			t.Errorf("isDNSSubdomainFast(%q) = %v, apimachinery says %v", s, got, want)
		}
		// Only soundness here: strings.ToLower maps a few non-ASCII runes
		// (the Kelvin sign) to ASCII, which the slow path then accepts.
		if got, want := isDNSSubdomainFast(s, true), len(validation.IsDNS1123Subdomain(strings.ToLower(s))) == 0; got && !want {
			t.Errorf("isDNSSubdomainFast(%q, fold) accepts what apimachinery rejects", s)
		}
		if got, want := isCIdentifierFast(s), len(content.IsCIdentifier(s)) == 0; got != want {
			t.Errorf("isCIdentifierFast(%q) = %v, apimachinery says %v", s, got, want)
		}
	})
}
