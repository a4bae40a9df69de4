package validation

// This file is the single source of truth for every numeric limit that
// admission validation enforces. Other packages (compact, testgen, cli) must
// read limits from here rather than repeat the numbers. limits_test.go pins
// the values that upstream also defines against k8s.io/api/resource/v1, so a
// dependency bump that changes one of them fails loudly.
//
// Sources: "003" is the v1 ResourceSlice API reference (seed 003), "v1" the
// field docs and constants of k8s.io/api/resource/v1 v0.37.2, "001" KEP-4815
// "Limits", "002" KEP-5234 (newest revision) "Limits" and "API".

// Names and values in a ResourceSlice (no mixins involved).
const (
	DriverNameMaxLength          = 63  // 003 .spec.driver; v1 DriverNameMaxLength (same as CSI driver names)
	PoolNameMaxLength            = 253 // 003 .spec.pool.name; v1 PoolNameMaxLength
	QualifiedNameMaxDomainLength = 63  // v1 QualifiedName doc, DeviceMaxDomainLength
	QualifiedNameMaxIDLength     = 32  // v1 QualifiedName doc, DeviceMaxIDLength
	AttributeValueMaxLength      = 64  // 003 attributes{}.string/version; v1 DeviceAttributeMaxValueLength
)

// Per-slice and per-device limits of a plain v1 ResourceSlice.
const (
	MaxDevices                          = 128  // 003 .spec.devices; v1 ResourceSliceMaxDevices
	MaxDevicesWithAdvancedFeatures      = 64   // 003 .spec.devices (taints, counters); v1 ResourceSliceMaxDevicesWithAdvancedFeatures (also list attributes)
	MaxAttributesAndCapacitiesPerDevice = 32   // 003 .spec.devices[].attributes; v1 ResourceSliceMaxAttributesAndCapacitiesPerDevice
	MaxAttributeValuesPerDevice         = 48   // v1 ResourceSliceMaxAttributeValuesPerDevice (list items count one each)
	MaxTaintsPerDevice                  = 16   // 003 .spec.devices[].taints; v1 DeviceTaintsMaxLength
	MaxBindingConditions                = 4    // 003 bindingConditions; v1 BindingConditionsMaxSize
	MaxBindingFailureConditions         = 4    // 003 bindingFailureConditions; v1 BindingFailureConditionsMaxSize
	MaxCounterSets                      = 8    // 003 .spec.sharedCounters; v1 ResourceSliceMaxCounterSets
	MaxCountersPerCounterSet            = 32   // 003 .spec.sharedCounters[].counters; v1 ResourceSliceMaxCountersPerCounterSet
	MaxConsumptionsPerDevice            = 2    // 003 .spec.devices[].consumesCounters; v1 ResourceSliceMaxDeviceCounterConsumptionsPerDevice
	MaxCountersPerConsumption           = 32   // 003 consumesCounters[].counters; v1 ResourceSliceMaxCountersPerDeviceCounterConsumption
	MaxCompatibilityGroups              = 2    // v1 DeviceCompatibilityGroupsMaxSize
	MaxConsumedCountersPerSlice         = 2048 // 001 "Limits" (slice-wide); 002 "Limits" keeps 2048. kube-apiserver 1.37 does not check it: a warning for plain slices.
	MaxCapacityRequestPolicyValidValues = 10   // 003 requestPolicy.validValues
)

// Limits that replace or add to the ones above when a slice uses mixins
// (002 "Limits"). See doc.go for how the two sets interact.
const (
	MixinMaxDevices                          = 128                                 // 002 "Limits": total number of devices
	MixinMaxAttributesAndCapacitiesPerSlice  = 4096                                // 002: attributes+capacities across devices and device mixins
	MixinMaxCountersPerSlice                 = 256                                 // 002: counters across counter sets and counter set mixins
	MixinMaxConsumedCountersPerSlice         = 2048                                // 002: consumed counters across consumptions and consumption mixins
	MixinMaxCounterSets                      = 32                                  // 002: total number of counter sets
	MaxDeviceMixins                          = 128                                 // 002: device mixins
	MaxCounterSetMixins                      = 32                                  // 002: counter set mixins
	MaxConsumptionMixins                     = 128                                 // 002: device counter consumption mixins
	MaxDeviceIncludes                        = 8                                   // 002 "API" Device.Includes
	MaxCounterSetIncludes                    = 8                                   // 002 "API" CounterSet.Includes
	MaxConsumptionIncludes                   = 4                                   // 002 "API" DeviceCounterConsumption.Includes
	MixinMaxTaintsPerDevice                  = 4                                   // 002 "Limits": taints per device
	MixinMaxConsumptionsPerDevice            = 4                                   // 002 "Limits": device counter consumptions per device
	MixinMaxAttributesAndCapacitiesPerDevice = MaxAttributesAndCapacitiesPerDevice // 002: applies to the flattened device
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
