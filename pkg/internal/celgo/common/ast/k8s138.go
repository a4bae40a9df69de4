//go:build k8s138

package ast

import up "cel.dev/cel-go/common/ast"

type (
	Expr = up.Expr
)

const (
	CallKind    = up.CallKind
	LiteralKind = up.LiteralKind
)

var (
	NewExprVisitor = up.NewExprVisitor
	PreOrderVisit  = up.PreOrderVisit
)
