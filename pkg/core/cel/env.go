package cel

import (
	"fmt"

	"github.com/dractl/dractl/pkg/internal/celgo/cel"
	"github.com/dractl/dractl/pkg/internal/celgo/checker"
	"github.com/dractl/dractl/pkg/internal/celgo/ext"
	"github.com/dractl/dractl/pkg/internal/celgo/interpreter"
	resourcev1 "k8s.io/api/resource/v1"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/library"
)

// Names of the variable and its fields, as selector authors write them.
const (
	deviceVar     = "device"
	driverVar     = "driver"
	multiAllocVar = "allowMultipleAllocations"
	attributesVar = "attributes"
	capacityVar   = "capacity"

	// deviceTypeName is the object type name upstream gives the variable; it
	// shows up in type-check errors, so keeping it makes messages identical.
	deviceTypeName = "kubernetes.DRADevice"
)

// Limits taken from the API so that cost estimation sees the same worst
// case as the API server does.
const (
	// MaxCost is the cost limit of one selector, both the estimated cost at
	// compile time and the actual cost at run time.
	MaxCost = resourcev1.CELSelectorExpressionMaxCost
)

// declTypes are the declared shapes of the device variable. The maximum
// sizes are what lets cost estimation bound comprehensions and string
// functions; without them every map and string would be unbounded.
type declTypes struct {
	device        *apiservercel.DeclType
	outerAttrs    *apiservercel.DeclType
	innerAttrs    *apiservercel.DeclType
	attributeType *apiservercel.DeclType
}

func withMaxElements(in *apiservercel.DeclType, n int64) *apiservercel.DeclType {
	out := *in
	out.MaxElements = n
	return &out
}

// newDeclTypes builds the newest device type of Kubernetes 1.37, the one
// with DRAConsumableCapacity (allowMultipleAllocations) and
// DRAListTypeAttributes (attribute values are dyn, so list attributes can
// be iterated). Stored expressions always see this type upstream, and new
// expressions see it when both gates are on, which dractl assumes.
func newDeclTypes() declTypes {
	domain := withMaxElements(apiservercel.StringType, resourcev1.DeviceMaxDomainLength)
	id := withMaxElements(apiservercel.StringType, resourcev1.DeviceMaxIDLength)
	driver := withMaxElements(apiservercel.StringType, resourcev1.DriverNameMaxLength)
	// BoolType has no size, which makes the estimate of its use too low.
	multiAlloc := withMaxElements(apiservercel.BoolType, 1)
	perDevice := int64(resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)

	// A value is either a scalar (a string or version of at most 64 bytes)
	// or a list of at most 48 values; the estimate must cover both.
	attr := withMaxElements(apiservercel.DynType,
		int64(max(resourcev1.DeviceAttributeMaxValueLength, resourcev1.ResourceSliceMaxAttributeValuesPerDevice)))
	innerAttrs := apiservercel.NewMapType(id, attr, perDevice)
	outerAttrs := apiservercel.NewMapType(domain, innerAttrs, perDevice)
	innerCap := apiservercel.NewMapType(id, apiservercel.QuantityDeclType, perDevice)
	outerCap := apiservercel.NewMapType(domain, innerCap, perDevice)

	fields := map[string]*apiservercel.DeclField{}
	for _, f := range []*apiservercel.DeclField{
		apiservercel.NewDeclField(multiAllocVar, multiAlloc, true, nil, nil),
		apiservercel.NewDeclField(driverVar, driver, true, nil, nil),
		apiservercel.NewDeclField(attributesVar, outerAttrs, true, nil, nil),
		apiservercel.NewDeclField(capacityVar, outerCap, true, nil, nil),
	} {
		fields[f.Name] = f
	}
	return declTypes{
		device:        apiservercel.NewObjectType(deviceTypeName, fields),
		outerAttrs:    outerAttrs,
		innerAttrs:    innerAttrs,
		attributeType: attr,
	}
}

// newEnv builds the CEL environment in which Kubernetes 1.37 evaluates
// stored DRA selectors: the Kubernetes base environment with every option
// in effect at 1.37, plus DRA's bindings, device variable and includes().
//
// The list mirrors k8s.io/apiserver/pkg/cel/environment (base.go at
// v0.37.2). That package cannot be imported here without adding
// k8s.io/component-base to go.mod only for its version lookup, and dractl
// needs exactly one environment, not a version-selected set.
func newEnv(types declTypes) (*cel.Env, error) {
	provider := apiservercel.NewDeclTypeProvider(types.device)
	// Upstream enables this from compatibility version 1.31 on: fields
	// named like CEL keywords are reachable without escaping.
	provider.SetRecognizeKeywordAsFieldName(true)

	// Two stages like upstream: the type provider must wrap the provider
	// of the environment that already holds the libraries' types.
	base, err := cel.NewEnv(
		// Kubernetes base, 1.0 .. 1.37, in upstream's order.
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		library.URLs(),
		library.Regex(),
		cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
		library.Authz(),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		library.Quantity(),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
		),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		library.IP(),
		library.CIDR(),
		library.Format(),
		library.AuthzSelectors(),
		ext.TwoVarComprehensions(),
		library.SemverLib(library.SemverVersion(1)),
		ext.Lists(ext.ListsVersion(3)),
		library.Lists(library.ListsVersion(1)),
		cel.Lib(programOptions{}),
	)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes base CEL environment: %w", err)
	}
	providerOpts, err := provider.EnvOptions(base.CELTypeProvider())
	if err != nil {
		return nil, fmt.Errorf("declaring %s: %w", deviceTypeName, err)
	}
	opts := []cel.EnvOption{
		// cel.bind lets a selector name a domain map once.
		ext.Bindings(ext.BindingsVersion(0)),
		cel.Variable(deviceVar, types.device.CelType()),
	}
	opts = append(opts, listIncludes()...)
	opts = append(opts, providerOpts...)
	env, err := base.Extend(opts...)
	if err != nil {
		return nil, fmt.Errorf("declaring the %q variable: %w", deviceVar, err)
	}
	return env, nil
}

// programOptions carries the base environment's program options, which
// cel.Lib attaches to every program built from the environment.
type programOptions struct{}

func (programOptions) CompileOptions() []cel.EnvOption { return nil }

func (programOptions) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)),
		cel.CostTracking(&library.CostEstimator{}),
		// DRA replaces the base per-call limit with its own.
		cel.CostLimit(MaxCost),
		cel.InterruptCheckFrequency(celconfig.CheckFrequency),
	}
}

// sizeEstimator gives the cost estimator the maximum sizes declared for
// the device variable, so that e.g. a string function on an attribute is
// bounded by the 64-byte value limit instead of being unbounded.
type sizeEstimator struct {
	types declTypes
}

func (s *sizeEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) == 0 || path[0] != deviceVar {
		return nil
	}
	node := s.types.device
	for _, name := range path[1:] {
		switch name {
		case "@items", "@values":
			if node.ElemType == nil {
				return nil
			}
			node = node.ElemType
		case "@keys":
			if node.KeyType == nil {
				return nil
			}
			node = node.KeyType
		default:
			if f, ok := node.Fields[name]; ok && f.Type != nil {
				node = f.Type
				continue
			}
			// Any name inside a domain's attribute map has the size of
			// an attribute value, whatever the name.
			if node.ElemType == s.types.attributeType {
				node = s.types.attributeType
				continue
			}
			return nil
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(node.MaxElements)}
}

func (s *sizeEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}
