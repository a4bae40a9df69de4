package cel

import (
	"context"
	"errors"
	"fmt"

	"github.com/blang/semver/v4"
	"github.com/dractl/dractl/pkg/internal/celgo/cel"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types/ref"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types/traits"
	resourcev1 "k8s.io/api/resource/v1"
	apiservercel "k8s.io/apiserver/pkg/cel"

	"github.com/dractl/dractl/pkg/core/api"
)

// Derived attributes (DRADerivedAttributes) are request-scoped attributes
// a claim computes with CEL from each candidate device, for its
// matchAttribute and distinctAttribute constraints to compare. An
// expression must evaluate to what an attribute can hold: a bool, int,
// string or semver, or a list of one of those.

// MaxDerivedCost is the estimated cost limit of one derived attribute
// expression, and of all of a claim's together (kube-apiserver 1.37).
const MaxDerivedCost = min(resourcev1.CELSelectorExpressionMaxCost, resourcev1.DeviceClaimDerivedAttributeCELMaxCost)

// derivedKey keeps derived programs apart from selectors of the same
// source in the compile cache: the two are checked against different
// result types.
const derivedKey = "derived\x00"

// CompileDerived returns the program of a derived attribute expression,
// from the cache when it was compiled before. The error is a
// *CompileError; an expression estimated above MaxDerivedCost is
// KindTooComplex.
func (c *Compiler) CompileDerived(expr string) (*Program, error) {
	return c.cached(derivedKey+expr, expr, c.compileDerived)
}

func (c *Compiler) compileDerived(expr string) (*Program, error) {
	return c.compileAs(expr, MaxDerivedCost, func(out *cel.Type) string {
		if derivedType(out) {
			return ""
		}
		return fmt.Sprintf("must evaluate to a primitive scalar (string, integer, boolean, semver) or a list of these scalars, not %s", out)
	})
}

// derivedType: a scalar an attribute can hold (or dyn, known at run time),
// or a list of one.
func derivedType(t *cel.Type) bool {
	scalar := func(t *cel.Type) bool {
		return t.IsExactType(cel.BoolType) || t.IsExactType(cel.IntType) || t.IsExactType(cel.StringType) ||
			t.IsExactType(cel.AnyType) || t.IsExactType(cel.DynType) || t.IsExactType(apiservercel.SemverType)
	}
	if scalar(t) {
		return true
	}
	return t.TypeName() == "list" && len(t.Parameters()) == 1 && scalar(t.Parameters()[0])
}

// Attribute evaluates a derived attribute expression on one device. A
// runtime failure, or a value an attribute cannot hold, is an *EvalError.
func (p *Program) Attribute(ctx context.Context, d Device) (api.DeviceAttribute, error) {
	if d.View.Device == nil {
		return api.DeviceAttribute{}, &EvalError{Expression: p.expr, Err: errors.New("device view has no device")}
	}
	if err := CheckAttributes(d.View); err != nil {
		return api.DeviceAttribute{}, &EvalError{Expression: p.expr, Err: err}
	}
	if p.rangeErr != nil {
		return api.DeviceAttribute{}, &EvalError{Expression: p.expr, Err: p.rangeErr}
	}
	dv := p.c.values.Get().(*deviceValue)
	dv.reset(p.c.env.CELTypeAdapter(), d)
	out, _, err := p.prog.ContextEval(ctx, dv)
	var attr api.DeviceAttribute
	if err == nil {
		// Converted before dv is released: lists may still read from it.
		attr, err = toAttribute(out)
	}
	dv.release()
	p.c.values.Put(dv)
	if err != nil {
		return api.DeviceAttribute{}, &EvalError{Expression: p.expr, Err: err}
	}
	return attr, nil
}

// toAttribute turns a CEL value into an attribute. An empty list becomes
// an empty string list, as upstream decides.
func toAttribute(v ref.Val) (api.DeviceAttribute, error) {
	switch x := v.Value().(type) {
	case bool:
		return api.DeviceAttribute{BoolValue: &x}, nil
	case int64:
		return api.DeviceAttribute{IntValue: &x}, nil
	case string:
		return api.DeviceAttribute{StringValue: &x}, nil
	case semver.Version:
		s := x.String()
		return api.DeviceAttribute{VersionValue: &s}, nil
	}
	l, ok := v.(traits.Lister)
	if !ok {
		return api.DeviceAttribute{}, fmt.Errorf("unsupported CEL return type: %T", v.Value())
	}
	n, ok := l.Size().Value().(int64)
	if !ok {
		return api.DeviceAttribute{}, fmt.Errorf("expected list size to be int64, got %T", l.Size().Value())
	}
	if n == 0 {
		return api.DeviceAttribute{StringValues: []string{}}, nil
	}
	var out api.DeviceAttribute
	for i := range n {
		e := l.Get(types.Int(i)).Value()
		switch x := e.(type) {
		case bool:
			if i == 0 || out.BoolValues != nil {
				out.BoolValues = append(out.BoolValues, x)
				continue
			}
		case int64:
			if i == 0 || out.IntValues != nil {
				out.IntValues = append(out.IntValues, x)
				continue
			}
		case string:
			if i == 0 || out.StringValues != nil {
				out.StringValues = append(out.StringValues, x)
				continue
			}
		case semver.Version:
			if i == 0 || out.VersionValues != nil {
				out.VersionValues = append(out.VersionValues, x.String())
				continue
			}
		default:
			if i == 0 {
				return api.DeviceAttribute{}, fmt.Errorf("unsupported list element type: %T", e)
			}
		}
		return api.DeviceAttribute{}, fmt.Errorf("list element at index %d has type %T, unlike the first", i, e)
	}
	return out, nil
}

// CheckAttributes reports the first attribute of the device that upstream
// cannot hand to CEL: one with no value set, or a version that is not
// semver. Upstream converts every attribute of a device before it
// evaluates any expression on it, so such a device fails every selector
// and every derived attribute, whichever attributes the expression reads.
func CheckAttributes(v api.DeviceView) error {
	for name, a := range v.Attributes() {
		switch {
		case a.IntValues != nil, a.BoolValues != nil, a.StringValues != nil:
		case a.VersionValues != nil:
			for _, s := range a.VersionValues {
				if _, err := semver.Parse(s); err != nil {
					return fmt.Errorf("attribute %s: parse semantic version: %w", name, err)
				}
			}
		case a.IntValue != nil, a.BoolValue != nil, a.StringValue != nil:
		case a.VersionValue != nil:
			if _, err := semver.Parse(*a.VersionValue); err != nil {
				return fmt.Errorf("attribute %s: parse semantic version: %w", name, err)
			}
		default:
			return fmt.Errorf("attribute %s: unsupported attribute value", name)
		}
	}
	return nil
}
