//go:build k8s138

package cel

import up "cel.dev/cel-go/cel"

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
