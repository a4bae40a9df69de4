package cel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dractl/dractl/pkg/internal/celgo/cel"
	celast "github.com/dractl/dractl/pkg/internal/celgo/common/ast"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types/ref"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/utils/keymutex"
	"k8s.io/utils/lru"

	"github.com/dractl/dractl/pkg/core/api"
)

// DefaultCacheSize is how many compiled selectors a Compiler keeps. A
// selector is compiled once and then evaluated for every candidate device;
// the inputs of one dractl run hold far fewer distinct selectors than
// this, and the bound keeps a long-running caller from growing forever.
const DefaultCacheSize = 1024

// Compiler compiles DRA device selectors. It is safe for concurrent use.
type Compiler struct {
	env       *cel.Env
	envErr    error
	types     declTypes
	costLimit uint64
	// runtimeCostLimit equals costLimit outside tests; a test lowers it
	// alone to reach the runtime limit, which an estimate within the
	// compile-time limit otherwise never lets an expression reach.
	runtimeCostLimit uint64

	cache     *lru.Cache
	compiling keymutex.KeyMutex

	// values recycles the per-evaluation device values; after the first
	// few evaluations Matches allocates none of its own.
	values sync.Pool
}

// Option configures a Compiler.
type Option func(*Compiler)

// WithCacheSize sets how many compiled programs are kept (at least one).
func WithCacheSize(n int) Option {
	return func(c *Compiler) {
		c.cache = lru.New(max(n, 1))
	}
}

// NewCompiler builds the 1.37 DRA environment. Building it cannot fail
// with valid library code; if it does anyway, every Compile reports the
// reason instead of this function panicking.
func NewCompiler(opts ...Option) *Compiler {
	c := &Compiler{
		types:            newDeclTypes(),
		costLimit:        MaxCost,
		runtimeCostLimit: MaxCost,
		cache:            lru.New(DefaultCacheSize),
		compiling:        keymutex.NewHashed(0),
	}
	c.values.New = func() any { return new(deviceValue) }
	for _, o := range opts {
		o(c)
	}
	c.env, c.envErr = newEnv(c.types)
	return c
}

// Default returns a Compiler shared by the process, built on first use.
var Default = sync.OnceValue(func() *Compiler { return NewCompiler() })

// Device is the input of a selector: the device's effective attributes and
// capacities come from View, read lazily through its mixins, and Driver is
// the domain of names written without one.
type Device struct {
	Driver string
	View   api.DeviceView
}

// Program is a compiled selector. It is immutable and safe for concurrent
// use.
type Program struct {
	expr    string
	prog    cel.Program
	maxCost uint64
	c       *Compiler
	// rangeErr: the expression has a quantity literal outside
	// api.QuantityInRange; comparing it could run for minutes, so every
	// evaluation fails with this instead.
	rangeErr error
}

// Expression is the source of the selector.
func (p *Program) Expression() string { return p.expr }

// EstimatedCost is the worst-case cost the checker computed; it never
// exceeds MaxCost for a program Compile returned.
func (p *Program) EstimatedCost() uint64 { return p.maxCost }

// Compile returns the program of a selector, from the cache when the same
// expression was compiled before. Concurrent calls for one expression
// compile it once. The error is a *CompileError.
func (c *Compiler) Compile(expr string) (*Program, error) {
	return c.cached(expr, expr, c.compile)
}

// cached returns the program cached under key, or compiles expr and caches
// it.
func (c *Compiler) cached(key, expr string, compile func(string) (*Program, error)) (*Program, error) {
	if v, ok := c.cache.Get(key); ok {
		return v.(*cached).get()
	}
	// Compiling takes far longer than waiting for a concurrent compile
	// of the same expression, so serialise per expression.
	c.compiling.LockKey(key)
	defer func() { _ = c.compiling.UnlockKey(key) }()
	if v, ok := c.cache.Get(key); ok {
		return v.(*cached).get()
	}
	p, err := compile(expr)
	// Failures are cached too: compiling is deterministic, and an
	// invalid selector in a class is otherwise recompiled for every claim.
	// Internal errors are not, in case they are transient.
	var ce *CompileError
	if err == nil || (errors.As(err, &ce) && ce.Kind != KindInternal) {
		c.cache.Add(key, &cached{p: p, err: err})
	}
	return p, err
}

type cached struct {
	p   *Program
	err error
}

func (e *cached) get() (*Program, error) { return e.p, e.err }

func (c *Compiler) compile(expr string) (*Program, error) {
	// Attribute values are dyn, so `device.attributes["d"].flag` alone is a
	// valid selector whose bool-ness is only known at run time; upstream
	// accepts it and so do we. Everything statically typed must be bool.
	return c.compileAs(expr, c.costLimit, func(out *cel.Type) string {
		if out.IsExactType(cel.BoolType) || out.IsExactType(c.types.attributeType.CelType()) {
			return ""
		}
		return fmt.Sprintf("must evaluate to %s or the unknown type, not %s", cel.BoolType, out)
	})
}

// compileAs compiles expr in the DRA environment; resultType says what is
// wrong with the result type ("" when nothing), and the estimated cost
// must stay within costLimit.
func (c *Compiler) compileAs(expr string, costLimit uint64, resultType func(*cel.Type) string) (*Program, error) {
	fail := func(kind ErrorKind, format string, args ...any) (*Program, error) {
		return nil, &CompileError{Expression: expr, Kind: kind, Detail: fmt.Sprintf(format, args...)}
	}
	if c.envErr != nil {
		return fail(KindInternal, "unexpected error loading CEL environment: %v", c.envErr)
	}
	ast, iss := c.env.Compile(expr)
	if iss.Err() != nil {
		return fail(KindInvalid, "compilation failed: %s", iss.String())
	}
	if msg := resultType(ast.OutputType()); msg != "" {
		return fail(KindInvalid, "%s", msg)
	}
	est, err := c.env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: &sizeEstimator{types: c.types}})
	if err != nil {
		return fail(KindInternal, "cost estimation failed: %v", err)
	}
	if est.Max > costLimit {
		return nil, &CompileError{
			Expression: expr, Kind: KindTooComplex, EstimatedCost: est.Max,
			Detail: fmt.Sprintf("too complex, exceeds cost limit: estimated worst-case cost %d, limit %d", est.Max, costLimit),
		}
	}
	prog, err := c.env.Program(ast, cel.CostLimit(c.runtimeCostLimit))
	if err != nil {
		return fail(KindInternal, "program instantiation failed: %v", err)
	}
	return &Program{expr: expr, prog: prog, maxCost: est.Max, c: c, rangeErr: quantityLiterals(ast)}, nil
}

// quantityLiterals checks the string literals given to quantity(). It does
// not make the expression invalid (kube-apiserver accepts it), only
// impossible to evaluate in bounded time.
func quantityLiterals(a *cel.Ast) error {
	var err error
	celast.PreOrderVisit(a.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if err != nil || e.Kind() != celast.CallKind || e.AsCall().FunctionName() != "quantity" || len(e.AsCall().Args()) != 1 {
			return
		}
		arg := e.AsCall().Args()[0]
		if arg.Kind() != celast.LiteralKind {
			return
		}
		lit, ok := arg.AsLiteral().(types.String)
		if !ok {
			return
		}
		if q, perr := resource.ParseQuantity(string(lit)); perr == nil && !api.QuantityInRange(q) {
			err = fmt.Errorf("quantity(%.40q): magnitude must be zero or between %g and %g to be compared", string(lit), api.MinQuantity, api.MaxQuantity)
		}
	}))
	return err
}

// Matches evaluates the selector on one device. Any runtime failure (a
// missing attribute, a type mismatch, the cost limit, a cancelled ctx) is
// an *EvalError: like upstream, the allocator must treat it as fatal for
// the claim rather than as "does not match".
func (p *Program) Matches(ctx context.Context, d Device) (bool, error) {
	if d.View.Device == nil {
		return false, &EvalError{Expression: p.expr, Err: errors.New("device view has no device")}
	}
	if p.rangeErr != nil {
		return false, &EvalError{Expression: p.expr, Err: p.rangeErr}
	}
	dv := p.c.values.Get().(*deviceValue)
	dv.reset(p.c.env.CELTypeAdapter(), d)
	var out ref.Val
	var err error
	if ctx.Done() == nil {
		// A context that can never be cancelled needs no interrupt
		// checks; skipping ContextEval saves its per-call context.
		out, _, err = p.prog.Eval(dv)
	} else {
		out, _, err = p.prog.ContextEval(ctx, dv)
	}
	// The result is a bool or an error string; neither refers to dv.
	dv.release()
	p.c.values.Put(dv)
	if err != nil {
		return false, &EvalError{Expression: p.expr, Err: err}
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, &EvalError{Expression: p.expr, Err: fmt.Errorf("selector must evaluate to bool, got %s", typeName(out))}
	}
	return bool(b), nil
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}

// ErrorKind classifies a CompileError the way admission validation does.
type ErrorKind int

const (
	// KindInvalid: the expression does not parse, type-check, or
	// evaluate to bool.
	KindInvalid ErrorKind = iota
	// KindTooComplex: the estimated cost is above MaxCost.
	KindTooComplex
	// KindInternal: the environment itself failed.
	KindInternal
)

// CompileError is why an expression was not compiled.
type CompileError struct {
	Expression string
	Kind       ErrorKind
	// Detail is the message without the expression, as it goes into a
	// field error.
	Detail string
	// EstimatedCost is set for KindTooComplex.
	EstimatedCost uint64
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("CEL selector %q: %s", e.Expression, e.Detail)
}

// FieldError turns the error into the field error upstream validation
// reports for a selector's expression field: Invalid with the expression
// as the value, Forbidden when too complex, InternalError otherwise.
func (e *CompileError) FieldError(path *field.Path) *field.Error {
	switch e.Kind {
	case KindInvalid:
		return field.Invalid(path, e.Expression, e.Detail)
	case KindTooComplex:
		return field.Forbidden(path, e.Detail)
	default:
		return field.InternalError(path, errors.New(e.Detail))
	}
}

// EvalError is a runtime failure of a selector.
type EvalError struct {
	Expression string
	Err        error
}

func (e *EvalError) Error() string {
	msg := fmt.Sprintf("CEL selector %q: %v", e.Expression, e.Err)
	if strings.Contains(msg, "no such key:") {
		// The most common mistake: reading an attribute some devices lack.
		msg += " (guard optional attributes with has(), or read them with .?name.orValue(default))"
	}
	return msg
}

func (e *EvalError) Unwrap() error { return e.Err }
