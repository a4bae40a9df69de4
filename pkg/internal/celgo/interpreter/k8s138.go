//go:build k8s138

package interpreter

import up "cel.dev/cel-go/interpreter"

type (
	Activation = up.Activation
)

var (
	PresenceTestHasCost = up.PresenceTestHasCost
)
