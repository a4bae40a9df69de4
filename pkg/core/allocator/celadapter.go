package allocator

import (
	"context"
	"crypto/rand"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/core/api"
	dcel "github.com/dractl/dractl/pkg/core/cel"
)

// celCompiler adapts pkg/core/cel. Each Allocator gets its own compiler so that
// nothing is shared through package state.
type celCompiler struct{ c *dcel.Compiler }

func defaultCompiler() SelectorCompiler { return celCompiler{c: dcel.NewCompiler()} }

// SharedCompiler compiles with pkg/core/cel's process-wide compiler and cache,
// the counterpart of the CEL cache kube-scheduler keeps across scheduling
// cycles. (Options{Compiler: nil} builds a fresh compiler per New, which
// costs milliseconds per cold call.) It compiles derived attributes too.
func SharedCompiler() SelectorCompiler { return celCompiler{c: dcel.Default()} }

// NewSelectorCompiler returns the pkg/core/cel compiler an Allocator uses when
// Options.Compiler is nil. Building one costs as much as a small
// allocation (a CEL environment); callers that build an Allocator per
// scheduling cycle share one instead.
func NewSelectorCompiler() SelectorCompiler { return defaultCompiler() }

func (c celCompiler) CompileSelector(expr string) (Selector, error) {
	p, err := c.c.Compile(expr)
	if err != nil {
		return nil, err
	}
	return celProgram{p}, nil
}

func (c celCompiler) CompileDerived(expr string) (*dcel.Program, error) {
	return c.c.CompileDerived(expr)
}

type celProgram struct{ p *dcel.Program }

func (p celProgram) Matches(ctx context.Context, driver string, view api.DeviceView) (bool, error) {
	return p.p.Matches(ctx, dcel.Device{Driver: driver, View: view})
}

// randomShareID is upstream's choice: a fresh random UUID per share.
func randomShareID() types.UID {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}
