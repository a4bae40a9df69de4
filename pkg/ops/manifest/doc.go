// Package manifest writes objects as manifests, as `kubectl get -o yaml`
// and `-o json` print them: YAML documents or one JSON object (a v1 List
// when there are several), with apiVersion and kind filled in. It is the
// way back of pkg/core/decode, which reads what it writes.
package manifest
