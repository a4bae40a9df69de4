//go:build k8s138

package checker

import up "cel.dev/cel-go/checker"

type (
	AstNode      = up.AstNode
	CallEstimate = up.CallEstimate
	SizeEstimate = up.SizeEstimate
)

var (
	PresenceTestHasCost = up.PresenceTestHasCost
)
