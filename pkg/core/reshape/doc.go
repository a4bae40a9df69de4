// Package reshape rewrites ResourceSlices between the two forms dractl
// reads: the KEP-5234 mixin form and the flat form resource.k8s.io/v1
// stores. Both directions keep what a slice means, so each is the other's
// check.
//
// ForV1 and Split turn ResourceSlices that may use KEP-5234 mixins into
// resource.k8s.io/v1 slices that a server without mixins accepts: every
// include applied (api.Flatten), then each slice cut where the v1
// per-slice limits, which are tighter than the mixin form's, require it.
// A driver that publishes (pkg/driver/publish) and `dractl flatten` use the
// same cut, so what one publishes the other prints.
//
// Compact and CompactPool rewrite ResourceSlices into KEP-5234 mixin form: entries
// that several devices, counter consumptions or counter sets state
// identically move into one mixin that each of them includes.
//
// The rewrite never changes meaning: api.Flatten of the result is
// semantically equal to api.Flatten of the input. A mixin only ever holds
// entries that every including object has with exactly the same encoded
// value, so no precedence rule is needed to read the result back, and
// Compact stays within the slice-wide and per-object limits of KEP-5234
// ("Limits").
package reshape
