// Package validation is dractl's admission validation: what kube-apiserver
// checks when a ResourceSlice, DeviceClass, ResourceClaim or
// ResourceClaimTemplate is created, reported as a field.ErrorList with full
// field paths. All limits live in limits.go.
//
// # Plain slices
//
// A ResourceSlice that sets no KEP-5234 field is checked against the rules
// of the v1 API (seed 003, k8s.io/api/resource/v1 v0.37.2 field docs and
// declarative markers) and kube-apiserver 1.37's handwritten validation.
// Deliberate differences, each stricter and each backed by a seed:
//
//   - The total number of consumed counters in a slice is limited to 2048
//     (seed 001 "Limits"; seed 002 keeps the number). kube-apiserver dropped
//     that check after 1.33, but it bounds the object size that the
//     allocator has to walk, and both KEPs state it.
//   - A device's nodeSelector must have exactly one term (003
//     .spec.devices[].nodeSelector), as the slice's must.
//   - validRange.min must not be negative (003 .validRange.min), also when
//     no step is set; step-grid checks use exact decimals, so values beyond
//     int64 are checked instead of rejected.
//   - Constraints must set exactly one of matchAttribute and
//     distinctAttribute; capacity requests must not be negative.
//
// Errors on map keys (attribute, capacity, counter names) are reported at the
// entry, e.g. spec.devices[0].attributes[bad/name], rather than at the map.
// Objects may be un-defaulted: a missing name with generateName, a missing
// namespace, an unset allocationMode are accepted as the server would after
// filling them in.
//
// # Slices with mixins
//
// A slice that uses mixins (api.ResourceSlice.UsesMixins) follows KEP-5234,
// seed 002 "Limits", which replaces per-object limits by slice-wide ones:
//
//	                               plain slice        with mixins
//	devices                        128 (64 advanced)  128
//	counter sets                   8                  32
//	counters per counter set       32                 - (256 across sets and counter set mixins)
//	counters per consumption       32                 - (2048 consumed across consumptions and their mixins)
//	consumptions per device        2                  4
//	taints per device              16                 4
//	attributes+capacities / device 32                 32 on the flattened device, 4096 across devices and device mixins
//
// The "advanced features" limit of 64 devices does not apply with mixins:
// the slice-wide totals bound the object size it protected. Totals count
// entries where they are written (the size of the object), the per-device
// 32 counts the flattened device. Every include must name a mixin of its
// kind in the same slice (field.NotFound at includes[j]); includes per
// device and counter set are at most 8, per consumption 4. Counters of a
// counter set or consumption may come entirely from mixins: "counters is
// required" applies to the flattened object. Mixin names are DNS labels,
// unique per kind; counter mixins must have counters. A device mixin's
// capacity may carry a requestPolicy, but a device that does not allow
// multiple allocations must not receive one through an include.
package validation
