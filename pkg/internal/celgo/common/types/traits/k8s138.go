//go:build k8s138

package traits

import up "cel.dev/cel-go/common/types/traits"

type (
	Container = up.Container
	Indexer   = up.Indexer
	Iterable  = up.Iterable
	Iterator  = up.Iterator
	Lister    = up.Lister
	Mapper    = up.Mapper
	Sizer     = up.Sizer
	Zeroer    = up.Zeroer
)
