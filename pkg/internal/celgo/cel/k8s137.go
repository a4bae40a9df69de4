//go:build !k8s138

// Package cel is cel-go's cel package as the Kubernetes minor being
// built links it: github.com/google/cel-go up to 1.37, cel.dev/cel-go
// (the module's new path) from 1.38, whose k8s.io/apiserver CEL libraries
// pkg/core/cel shares types with. It holds the names pkg/core/cel uses, so that one
// pkg/core/cel builds at every minor (docs/versions.md).
package cel

import up "github.com/google/cel-go/cel"

type (
	Ast           = up.Ast
	Env           = up.Env
	EnvOption     = up.EnvOption
	Program       = up.Program
	ProgramOption = up.ProgramOption
	Type          = up.Type
)

const (
	OptOptimize  = up.OptOptimize
	OptTrackCost = up.OptTrackCost
)

var (
	AnyType    = up.AnyType
	BoolType   = up.BoolType
	DynType    = up.DynType
	IntType    = up.IntType
	StringType = up.StringType
)

var (
	ASTValidators                        = up.ASTValidators
	CostEstimatorOptions                 = up.CostEstimatorOptions
	CostLimit                            = up.CostLimit
	CostTrackerOptions                   = up.CostTrackerOptions
	CostTracking                         = up.CostTracking
	CrossTypeNumericComparisons          = up.CrossTypeNumericComparisons
	DefaultUTCTimeZone                   = up.DefaultUTCTimeZone
	EagerlyValidateDeclarations          = up.EagerlyValidateDeclarations
	EvalOptions                          = up.EvalOptions
	HomogeneousAggregateLiterals         = up.HomogeneousAggregateLiterals
	InterruptCheckFrequency              = up.InterruptCheckFrequency
	Lib                                  = up.Lib
	NewEnv                               = up.NewEnv
	OptionalTypes                        = up.OptionalTypes
	ValidateDurationLiterals             = up.ValidateDurationLiterals
	ValidateHomogeneousAggregateLiterals = up.ValidateHomogeneousAggregateLiterals
	ValidateRegexLiterals                = up.ValidateRegexLiterals
	ValidateTimestampLiterals            = up.ValidateTimestampLiterals
	Variable                             = up.Variable
)
