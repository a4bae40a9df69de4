//go:build k8s138

package types

import up "cel.dev/cel-go/common/types"

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
