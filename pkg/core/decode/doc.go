// Package decode reads Kubernetes manifests the way a kube-apiserver with
// strict field validation would accept and store them.
//
// Inputs are files, directories (their *.yaml, *.yml and *.json entries in
// lexical order, not recursive) and stdin ("-"). A file holds YAML
// documents separated by "---" lines, or one or more concatenated JSON
// values; either may be a List (kind: List in v1, or a typed list such as
// ResourceSliceList) whose items are expanded in order.
//
// Decoding is strict: unknown fields, duplicate fields, values of the wrong
// type and malformed quantities are errors that name the file, the
// document, the list item, the object and the field path. Every problem in
// every document is reported, not only the first. Objects with any error
// are not returned; the others are, so a caller can report everything in
// one go.
//
// A decoded object looks like one read back from an API server: defaults of
// resource.k8s.io/v1 are applied (see defaults.go), namespaced objects
// without a namespace are put in "default" as kubectl would, cluster-scoped
// objects lose any namespace as the server drops it, and timestamps have
// second precision as they do in the server's JSON.
//
// YAML is parsed exactly once per document, with the same YAML 1.1 rules as
// sigs.k8s.io/yaml (so "yes" is a boolean), and duplicate keys survive the
// conversion to JSON so that sigs.k8s.io/json reports them with their path.
// Documents are parsed and decoded in parallel; results keep input order.
package decode
