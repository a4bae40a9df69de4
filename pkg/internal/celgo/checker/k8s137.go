//go:build !k8s138

// Package checker is cel-go's checker package as the Kubernetes minor being
// built links it: github.com/google/cel-go up to 1.37, cel.dev/cel-go
// (the module's new path) from 1.38, whose k8s.io/apiserver CEL libraries
// pkg/core/cel shares types with. It holds the names pkg/core/cel uses, so that one
// pkg/core/cel builds at every minor (docs/versions.md).
package checker

import up "github.com/google/cel-go/checker"

type (
	AstNode      = up.AstNode
	CallEstimate = up.CallEstimate
	SizeEstimate = up.SizeEstimate
)

var (
	PresenceTestHasCost = up.PresenceTestHasCost
)
