package validation

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/api"
)

// FuzzResourceSlice feeds arbitrary JSON through validation: whatever
// decodes must be validated without a panic, and validating twice must give
// the same answer (validation must neither mutate nor depend on map order).
func FuzzResourceSlice(f *testing.F) {
	for _, s := range []*api.ResourceSlice{plainSlice(), countersSlice(), mixinSlice(), mixinCounterSlice(), migSlice(false), migSlice(true)} {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"spec":{"devices":[{"name":"a","includes":["x"],"consumesCounters":[{"counterSet":"","includes":[""]}],
		"capacity":{"m":{"value":"1","requestPolicy":{"default":"1","validRange":{"min":"1e-900","step":"1e900"}}}}}],
		"mixins":{"device":[{"name":"x"}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s api.ResourceSlice
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		first := ResourceSlice(&s)
		second := ResourceSlice(&s)
		if len(first) != len(second) {
			t.Fatalf("validation not repeatable: %d then %d errors", len(first), len(second))
		}
		for i := range first {
			if first[i].Type != second[i].Type || first[i].Field != second[i].Field {
				t.Fatalf("validation not repeatable at %d: %v then %v", i, first[i], second[i])
			}
		}
	})
}

// migSlice builds a realistic node-local slice for an 4-GPU A100 node with
// MIG: per GPU the whole GPU plus 15 partitions, 64 devices in all, each
// with 8 attributes, 2 capacities and one counter consumption of 10
// counters. With mixins=true the shared attributes and consumption
// patterns move into mixins (the KEP-5234 form of the same slice).
func migSlice(mixins bool) *api.ResourceSlice {
	type profile struct {
		name         string
		count        int
		memory, sms  int64
		memorySlices int
	}
	profiles := []profile{
		{"whole", 1, 80, 98, 8},
		{"1g.10gb", 7, 10, 14, 1},
		{"1g.20gb", 2, 20, 14, 2},
		{"2g.20gb", 3, 20, 28, 2},
		{"3g.40gb", 2, 40, 42, 4},
		{"4g.40gb", 1, 40, 56, 4},
	}
	s := &api.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu.example.com-mig"},
		Spec: api.ResourceSliceSpec{
			Driver:                 driver,
			Pool:                   api.ResourcePool{Name: "node-1", Generation: 7, ResourceSliceCount: 2},
			NodeName:               ptr.To("node-1"),
			PartitionTypeAttribute: ptr.To(api.FullyQualifiedName(driver + "/profile")),
		},
	}
	if mixins {
		s.Spec.Mixins = &api.ResourceSliceMixins{Device: []api.DeviceMixin{{
			Name: "a100",
			Attributes: map[api.QualifiedName]api.DeviceAttribute{
				"product":       strAttr("NVIDIA A100-SXM4-80GB"),
				"architecture":  strAttr("Ampere"),
				"cudaCapable":   {BoolValue: ptr.To(true)},
				"driverVersion": {VersionValue: ptr.To("550.54.15")},
			},
		}}}
	}
	for gpu := range 4 {
		for _, p := range profiles {
			for k := range p.count {
				counters := map[string]api.Counter{
					"memory":         {Value: *resourceQuantity(p.memory, "Gi")},
					"multiprocessor": {Value: *resourceQuantity(p.sms, "")},
				}
				for m := range p.memorySlices {
					counters[fmt.Sprintf("memory-slice-%d", (k*p.memorySlices+m)%8)] = api.Counter{Value: *resourceQuantity(1, "")}
				}
				d := api.Device{
					Name: fmt.Sprintf("gpu-%d-%s-%d", gpu, sanitize(p.name), k),
					Attributes: map[api.QualifiedName]api.DeviceAttribute{
						"index":                                intAttr(int64(gpu)),
						"uuid":                                 strAttr(fmt.Sprintf("MIG-%08x-%04x", gpu, k)),
						api.QualifiedName(driver + "/profile"): strAttr(p.name),
						"partitionIndex":                       intAttr(int64(k)),
					},
					Capacity: map[api.QualifiedName]api.DeviceCapacity{
						"memory":          {Value: *resourceQuantity(p.memory, "Gi")},
						"multiprocessors": {Value: *resourceQuantity(p.sms, "")},
					},
					ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: fmt.Sprintf("gpu-%d", gpu), Counters: counters}},
				}
				if mixins {
					d.Includes = []string{"a100"}
				} else {
					d.Attributes["product"] = strAttr("NVIDIA A100-SXM4-80GB")
					d.Attributes["architecture"] = strAttr("Ampere")
					d.Attributes["cudaCapable"] = api.DeviceAttribute{BoolValue: ptr.To(true)}
					d.Attributes["driverVersion"] = api.DeviceAttribute{VersionValue: ptr.To("550.54.15")}
				}
				s.Spec.Devices = append(s.Spec.Devices, d)
			}
		}
	}
	return s
}

func sanitize(profile string) string {
	out := []byte(profile)
	for i, c := range out {
		if c == '.' {
			out[i] = '-'
		}
	}
	return string(out)
}

func TestMIGSliceIsValid(t *testing.T) {
	for _, mixins := range []bool{false, true} {
		s := migSlice(mixins)
		if len(s.Spec.Devices) != 64 {
			t.Fatalf("want 64 devices, got %d", len(s.Spec.Devices))
		}
		expectErrors(t, ResourceSlice(s))
		// One more device breaks the 64-device limit only without mixins.
		s.Spec.Devices = append(s.Spec.Devices, simpleDevice("extra"))
		if mixins {
			expectErrors(t, ResourceSlice(s))
		} else {
			expectErrors(t, ResourceSlice(s), eTooMany("spec.devices"))
		}
	}
}

func BenchmarkResourceSliceMIG(b *testing.B) {
	for _, mixins := range []bool{false, true} {
		s := migSlice(mixins)
		b.Run(fmt.Sprintf("mixins=%v", mixins), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if errs := ResourceSlice(s); len(errs) != 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}

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

func resourceQuantity(n int64, suffix string) *resource.Quantity {
	v := resource.MustParse(fmt.Sprintf("%d%s", n, suffix))
	return &v
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
