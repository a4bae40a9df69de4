//go:build !k8s138

// Package types is cel-go's common/types package as the Kubernetes minor being
// built links it: github.com/google/cel-go up to 1.37, cel.dev/cel-go
// (the module's new path) from 1.38, whose k8s.io/apiserver CEL libraries
// pkg/core/cel shares types with. It holds the names pkg/core/cel uses, so that one
// pkg/core/cel builds at every minor (docs/versions.md).
package types

import up "github.com/google/cel-go/common/types"

type (
	Adapter = up.Adapter
	Bool    = up.Bool
	Int     = up.Int
	String  = up.String
)

const (
	False   = up.False
	IntZero = up.IntZero
	True    = up.True
)

var (
	MapType  = up.MapType
	TypeType = up.TypeType
)

var (
	Equal                 = up.Equal
	NewDynamicList        = up.NewDynamicList
	NewErr                = up.NewErr
	NewRefValList         = up.NewRefValList
	NewRefValMap          = up.NewRefValMap
	NewStringInterfaceMap = up.NewStringInterfaceMap
	NewStringList         = up.NewStringList
)
