//go:build k8s138

package ref

import up "cel.dev/cel-go/common/types/ref"

type (
	Type = up.Type
	Val  = up.Val
)
