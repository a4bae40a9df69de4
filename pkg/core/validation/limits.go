package validation

// This file is the single source of truth for every numeric limit that
// admission validation enforces. Other packages (compact, testgen, cli) must
// read limits from here rather than repeat the numbers (TestLimitsDefinedOnce
// looks for copies across the repository). TestLimitsMatchUpstream pins the
// values that upstream also defines against k8s.io/api/resource/v1, so a
// dependency bump that changes one of them fails loudly.
//
// Sources: "ref" is the resource.k8s.io/v1 ResourceSlice API reference, "v1"
// the field docs and constants of k8s.io/api/resource/v1 v0.37.2, KEP-4815
// "Limits", KEP-5234 (newest revision) "Limits" and "API".

// Names and values in a ResourceSlice (no mixins involved).
const (
	DriverNameMaxLength          = 63  // ref .spec.driver; v1 DriverNameMaxLength (same as CSI driver names)
	PoolNameMaxLength            = 253 // ref .spec.pool.name; v1 PoolNameMaxLength
	QualifiedNameMaxDomainLength = 63  // v1 QualifiedName doc, DeviceMaxDomainLength
	QualifiedNameMaxIDLength     = 32  // v1 QualifiedName doc, DeviceMaxIDLength
	AttributeValueMaxLength      = 64  // ref attributes{}.string/version; v1 DeviceAttributeMaxValueLength
)

// Per-slice and per-device limits of a plain v1 ResourceSlice.
const (
	MaxDevices                          = 128  // ref .spec.devices; v1 ResourceSliceMaxDevices
	MaxDevicesWithAdvancedFeatures      = 64   // ref .spec.devices (taints, counters); v1 ResourceSliceMaxDevicesWithAdvancedFeatures (also list attributes)
	MaxAttributesAndCapacitiesPerDevice = 32   // ref .spec.devices[].attributes; v1 ResourceSliceMaxAttributesAndCapacitiesPerDevice
	MaxAttributeValuesPerDevice         = 48   // v1 ResourceSliceMaxAttributeValuesPerDevice (list items count one each)
	MaxTaintsPerDevice                  = 16   // ref .spec.devices[].taints; v1 DeviceTaintsMaxLength
	MaxBindingConditions                = 4    // ref bindingConditions; v1 BindingConditionsMaxSize
	MaxBindingFailureConditions         = 4    // ref bindingFailureConditions; v1 BindingFailureConditionsMaxSize
	MaxCounterSets                      = 8    // ref .spec.sharedCounters; v1 ResourceSliceMaxCounterSets
	MaxCountersPerCounterSet            = 32   // ref .spec.sharedCounters[].counters; v1 ResourceSliceMaxCountersPerCounterSet
	MaxConsumptionsPerDevice            = 2    // ref .spec.devices[].consumesCounters; v1 ResourceSliceMaxDeviceCounterConsumptionsPerDevice
	MaxCountersPerConsumption           = 32   // ref consumesCounters[].counters; v1 ResourceSliceMaxCountersPerDeviceCounterConsumption
	MaxCompatibilityGroups              = 2    // v1 DeviceCompatibilityGroupsMaxSize
	MaxConsumedCountersPerSlice         = 2048 // KEP-4815 "Limits" (slice-wide); KEP-5234 "Limits" keeps 2048. kube-apiserver 1.37 does not check it: a warning for plain slices.
	MaxCapacityRequestPolicyValidValues = 10   // ref requestPolicy.validValues
)

// Limits that replace or add to the ones above when a slice uses mixins
// (KEP-5234 "Limits"). See doc.go for how the two sets interact.
const (
	MixinMaxDevices                          = 128                                 // KEP-5234 "Limits": total number of devices
	MixinMaxAttributesAndCapacitiesPerSlice  = 4096                                // KEP-5234: attributes+capacities across devices and device mixins
	MixinMaxCountersPerSlice                 = 256                                 // KEP-5234: counters across counter sets and counter set mixins
	MixinMaxConsumedCountersPerSlice         = 2048                                // KEP-5234: consumed counters across consumptions and consumption mixins
	MixinMaxCounterSets                      = 32                                  // KEP-5234: total number of counter sets
	MaxDeviceMixins                          = 128                                 // KEP-5234: device mixins
	MaxCounterSetMixins                      = 32                                  // KEP-5234: counter set mixins
	MaxConsumptionMixins                     = 128                                 // KEP-5234: device counter consumption mixins
	MaxDeviceIncludes                        = 8                                   // KEP-5234 "API" Device.Includes
	MaxCounterSetIncludes                    = 8                                   // KEP-5234 "API" CounterSet.Includes
	MaxConsumptionIncludes                   = 4                                   // KEP-5234 "API" DeviceCounterConsumption.Includes
	MixinMaxTaintsPerDevice                  = 4                                   // KEP-5234 "Limits": taints per device
	MixinMaxConsumptionsPerDevice            = 4                                   // KEP-5234 "Limits": device counter consumptions per device
	MixinMaxAttributesAndCapacitiesPerDevice = MaxAttributesAndCapacitiesPerDevice // KEP-5234: applies to the flattened device
)

// Limits of DeviceClass, ResourceClaim and ResourceClaimTemplate.
const (
	MaxRequests          = 32 // v1 DeviceRequestsMaxSize
	MaxSubRequests       = 8  // v1 FirstAvailableDeviceRequestMaxSize
	MaxSelectors         = 32 // v1 DeviceSelectorsMaxSize
	MaxConstraints       = 32 // v1 DeviceConstraintsMaxSize
	MaxConfigs           = 32 // v1 DeviceConfigMaxSize
	MaxTolerations       = 16 // v1 DeviceTolerationsMaxLength
	MaxDerivedAttributes = 32 // v1 DeviceDerivedAttributesMaxSize
	// MaxDerivedAttributesCost bounds the estimated cost of all derived
	// attribute expressions of one claim together.
	MaxDerivedAttributesCost  = 1000000   // v1 DeviceClaimDerivedAttributeCELMaxCost
	MaxAllocationResults      = 32        // v1 AllocationResultsMaxSize
	CELExpressionMaxLength    = 10 * 1024 // v1 CELSelectorExpressionMaxLength
	CELExpressionMaxCost      = 1000000   // v1 CELSelectorExpressionMaxCost
	OpaqueParametersMaxLength = 10 * 1024 // v1 OpaqueParametersMaxLength
)
