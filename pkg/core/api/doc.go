// Package api holds dractl's ResourceSlice model: a strict superset of
// resource.k8s.io/v1 ResourceSlice that adds the mixins of KEP-5234
// (spec.mixins and the includes fields), together with the one place where
// mixin semantics are defined (the lazy views in mixins.go and Flatten) and
// the conversion to and from the upstream v1 types.
//
// Leaf types that KEP-5234 does not change (attributes, capacities,
// counters, taints, pools, node selectors) are the k8s.io/api/resource/v1
// types themselves, so everything that works on upstream values works here.
package api
