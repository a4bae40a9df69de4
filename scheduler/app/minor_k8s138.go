//go:build k8s138

package app

// builtFor: see minor_k8s137.go.
const builtFor = "1.38"
