//go:build !k8s138

// Package ext is cel-go's ext package as the Kubernetes minor being
// built links it: github.com/google/cel-go up to 1.37, cel.dev/cel-go
// (the module's new path) from 1.38, whose k8s.io/apiserver CEL libraries
// pkg/core/cel shares types with. It holds the names pkg/core/cel uses, so that one
// pkg/core/cel builds at every minor (docs/versions.md).
package ext

import up "github.com/google/cel-go/ext"

var (
	Bindings             = up.Bindings
	BindingsVersion      = up.BindingsVersion
	Lists                = up.Lists
	ListsVersion         = up.ListsVersion
	Sets                 = up.Sets
	Strings              = up.Strings
	StringsVersion       = up.StringsVersion
	TwoVarComprehensions = up.TwoVarComprehensions
)
