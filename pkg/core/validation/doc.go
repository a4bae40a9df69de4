// Package validation is dractl's admission validation: what kube-apiserver
// checks when a ResourceSlice, DeviceClass, ResourceClaim or
// ResourceClaimTemplate is created, reported as a field.ErrorList with full
// field paths. All limits live in limits.go.
//
// # Plain slices
//
// A ResourceSlice that sets no KEP-5234 field is accepted exactly when
// kube-apiserver 1.37 with all DRA feature gates enabled (including
// DRAFractionalCapacityRange) accepts it: the rules of the v1 API (the
// resource.k8s.io/v1 API reference, k8s.io/api/resource/v1 v0.37.2 field docs, declarative markers and
// zz_generated.validations.go) and the apiserver's handwritten validation.
//
// # Versions
//
// Each supported kube-apiserver minor (KubeVersion, versions.go) gets its
// own verdicts and words; the package's functions judge as the newest.
// What differs between the minors is one table, versionRules, read from the
// difference of k8s.io/kubernetes pkg/apis/resource/validation between
// v1.37.2 and v1.38.0-beta.0: 1.38 refuses qualified names with more than
// one slash (1.37 stores them unchecked), per-device node selectors with
// more than one term, numbers of more than 18 digits in version
// attributes, and claim capacity request names that are no qualified
// names; it reports a capacityKey that is no qualified name as such. A
// check that depends on the version tags its errors and warnings with the
// rule's origin and produces every minor's variant; KubeVersion keeps its
// own. 1.38's ratcheting of updates does not apply: dractl judges creates.
// Error types and field paths follow the apiserver where it has a rule,
// including its quirks: a validRange default problem is reported at
// requestPolicy.validRange.default, a value off the step grid at
// validRange.step.
//
// Rules of the seeds that the apiserver does not enforce are warnings
// (ResourceSliceWarnings), never errors:
//
//   - more than 2048 counters consumed by the devices of a slice (KEP-4815
//     "Limits"; kube-apiserver dropped the check after 1.33);
//   - a device nodeSelector with more than one term (the v1 API reference says exactly one;
//     kube-apiserver 1.37 requires that only of the slice's own selector, 1.38 of both);
//   - a negative validRange.min, unless the apiserver rejects it: it does
//     when a step is set and no bound is fractional, because then every
//     bound must lie in [0, MaxInt64];
//   - validValues entries that are equal but written differently (1 and
//     1000m), which the apiserver keeps apart by their decimal form.
//
// ResourceClaim, ResourceClaimTemplate and DeviceClass follow the same
// principle. ResourceClaimWarnings reports constraints that set both
// matchAttribute and distinctAttribute (the apiserver accepts that and uses
// matchAttribute), capacity requests with a malformed name or a negative
// amount (not validated by the apiserver) and problems in status.allocation
// (the apiserver drops the status on create). An unset toleration operator
// is accepted as its default, Equal.
//
// Known gaps, where dractl is looser: node allocatable resource names are checked
// against cpu, memory, ephemeral-storage and hugepages-<size> as read from
// the v1 field docs rather than from the apiserver's helper.
//
// Errors on map keys (attribute, capacity, counter names) are reported at the
// entry, e.g. spec.devices[0].attributes[bad/name], rather than at the map.
// Objects may be un-defaulted: a missing name with generateName, a missing
// namespace, an unset allocationMode are accepted as the server would after
// filling them in.
//
// # Slices with mixins
//
// A slice that uses mixins (api.ResourceSlice.UsesMixins) follows KEP-5234
// "Limits", which replaces per-object limits by slice-wide ones. The
// limits are named here and valued only in limits.go:
//
//	                          plain slice                                    with mixins
//	devices                   MaxDevices (MaxDevicesWithAdvancedFeatures)    MixinMaxDevices
//	counter sets              MaxCounterSets                                 MixinMaxCounterSets
//	counters per counter set  MaxCountersPerCounterSet                       - (MixinMaxCountersPerSlice across sets and counter set mixins)
//	counters per consumption  MaxCountersPerConsumption                      - (MixinMaxConsumedCountersPerSlice across consumptions and their mixins)
//	consumptions per device   MaxConsumptionsPerDevice                       MixinMaxConsumptionsPerDevice
//	taints per device         MaxTaintsPerDevice                             MixinMaxTaintsPerDevice
//	attributes+capacities     MaxAttributesAndCapacitiesPerDevice per device MixinMaxAttributesAndCapacitiesPerDevice on the flattened device, MixinMaxAttributesAndCapacitiesPerSlice across devices and device mixins
//
// The "advanced features" device limit does not apply with mixins: the
// slice-wide totals bound the object size it protected. Totals count
// entries where they are written (the size of the object); the per-device
// limit counts the flattened device. Every include must name a mixin of
// its kind in the same slice (field.NotFound at includes[j]); includes are
// at most MaxDeviceIncludes per device, MaxCounterSetIncludes per counter
// set and MaxConsumptionIncludes per consumption. Counters of a counter
// set or consumption may come entirely from mixins: "counters is required"
// applies to the flattened object. Mixin names are DNS labels, unique per
// kind; counter mixins must have counters. A device mixin's capacity may
// carry a requestPolicy, but a device that does not allow multiple
// allocations must not receive one through an include.
//
// Warnings apply to slices with mixins as well, except that
// MaxConsumedCountersPerSlice is a KEP-5234 limit there and stays an
// error.
package validation
