//go:build !k8s138

// Package interpreter is cel-go's interpreter package as the Kubernetes minor being
// built links it: github.com/google/cel-go up to 1.37, cel.dev/cel-go
// (the module's new path) from 1.38, whose k8s.io/apiserver CEL libraries
// pkg/core/cel shares types with. It holds the names pkg/core/cel uses, so that one
// pkg/core/cel builds at every minor (docs/versions.md).
package interpreter

import up "github.com/google/cel-go/interpreter"

type (
	Activation = up.Activation
)

var (
	PresenceTestHasCost = up.PresenceTestHasCost
)
