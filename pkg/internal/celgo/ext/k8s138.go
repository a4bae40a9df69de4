//go:build k8s138

package ext

import up "cel.dev/cel-go/ext"

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
