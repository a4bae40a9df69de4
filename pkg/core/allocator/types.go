package allocator

import (
	"context"
	"errors"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/validation"
)

// Input is a cluster state given whole, for New. None of it may be
// modified while the Allocator is in use.
type Input struct {
	// Pools are the result of pool.Assemble over every ResourceSlice of the
	// cluster.
	Pools []*pool.Pool
	// Classes are all DeviceClasses; requests name them.
	Classes []*resourcev1.DeviceClass
	// Allocated are claims whose status.allocation is set. Their devices,
	// consumed counters and consumed capacity are in use. Claims without an
	// allocation are ignored.
	Allocated []*resourcev1.ResourceClaim
}

// Strategy chooses among feasible devices.
type Strategy int

const (
	// FirstFit picks exactly what the upstream allocator picks.
	FirstFit Strategy = iota
	// BestFit prefers, for each request, devices that put the least of
	// their counter sets out of other devices' reach (bestfit.go): it
	// packs partially used counter sets before touching empty ones.
	BestFit
)

func (s Strategy) String() string {
	switch s {
	case FirstFit:
		return "FirstFit"
	case BestFit:
		return "BestFit"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// Options tune an Allocator. The zero value is first-fit with pkg/core/cel,
// every feature gate on, and the answers of Kubernetes 1.37.
type Options struct {
	Strategy Strategy
	// KubeVersion is the Kubernetes minor whose kube-scheduler the
	// allocator answers as, where upstream's allocator changed between
	// minors (versions.go lists how). A minor dractl has no rules for
	// takes the nearest supported one's; the zero value judges as 1.37,
	// the minor dractl's types are built on, so that callers that name no
	// version keep the answers they had.
	KubeVersion validation.KubeVersion
	// Features are the DRA feature gates in effect. With a gate off the
	// allocator answers as upstream's does with that gate off. The zero
	// value enables every gate.
	Features features.Set
	// Compiler compiles CEL selectors. Nil means pkg/core/cel.
	Compiler SelectorCompiler
	// NewShareID returns the shareID recorded for each allocation of a
	// device that allows multiple allocations. Upstream uses a random UUID;
	// nil does the same. Tests set it to get stable results.
	NewShareID func() types.UID
	// Cache, if set, carries compiled selector and derived-attribute
	// expressions over to later Allocators (results per device live in
	// the pools' tables). Nil keeps them within the Allocator.
	Cache *Cache

	// withoutLayers switches search layers off (layers.go); the answers
	// stay the same, only the work grows. Tests only.
	withoutLayers layerSet
	// stepBudget > 0 makes a search that takes more steps fail with
	// errStepBudget, so that tests of searches without pruning end.
	stepBudget int
	// wrapPruner, if set, stands between each search and its pruning
	// layers, so that tests can watch what the layers do. Tests only.
	wrapPruner func(*attempt, pruner) pruner
}

// SelectorCompiler compiles one CEL selector expression. It must be safe for
// concurrent use. A compile error is reported only when the selector is
// evaluated, as upstream does.
type SelectorCompiler interface {
	CompileSelector(expr string) (Selector, error)
}

// Selector is a compiled CEL selector. Matches must be safe for concurrent
// use; an error is a CEL runtime error.
type Selector interface {
	Matches(ctx context.Context, driver string, view api.DeviceView) (bool, error)
}

// UnfitError reports that the claims cannot be allocated on the node. It is
// not fatal: other nodes may fit.
type UnfitError struct {
	Node        string
	Explanation *Explanation
}

func (e *UnfitError) Error() string {
	if len(e.Explanation.InvalidPools) > 0 {
		// Upstream's words for this case, which its users search for.
		return fmt.Sprintf("claims do not fit on node %s: invalid resource pools were encountered (%s): %s",
			e.Node, e.Explanation.invalidPoolNames(), e.Explanation.Summary())
	}
	return fmt.Sprintf("claims do not fit on node %s: %s", e.Node, e.Explanation.Summary())
}

// FatalError reports a problem that no node can work around: an invalid pool
// that had to be considered (Err wraps *pool.InvalidError), a CEL runtime or
// compile error (naming claim, request and selector), an unknown
// DeviceClass, or a request upstream rejects.
type FatalError struct {
	// Claim is namespace/name of the claim being allocated, if any.
	Claim string
	// Request is the request or request/subrequest, if any.
	Request string
	// Subrequest is the subrequest's own name when the problem is one
	// subrequest's that upstream names alone; Error then says
	// "subrequest <name>" the way upstream does.
	Subrequest string
	Err        error
}

func (e *FatalError) Error() string {
	switch {
	case e.Claim != "" && e.Subrequest != "":
		return fmt.Sprintf("claim %s, subrequest %s: %v", e.Claim, e.Subrequest, e.Err)
	case e.Claim != "" && e.Request != "":
		return fmt.Sprintf("claim %s, request %s: %v", e.Claim, e.Request, e.Err)
	case e.Claim != "":
		return fmt.Sprintf("claim %s: %v", e.Claim, e.Err)
	}
	return e.Err.Error()
}

func (e *FatalError) Unwrap() error { return e.Err }

// NodeError reports that the claims cannot be allocated on the node for a
// reason of the node's pools rather than of the claims: from Kubernetes
// 1.38 on (Options.KubeVersion), a request for all devices that meets an
// invalid pool, or one being updated, among the pools the node sees.
// Other nodes may still fit; kube-scheduler 1.38 marks the node
// unschedulable (upstream's ErrFailedAllocationOnNode) where 1.37 failed
// the pod with an error (*FatalError).
type NodeError struct {
	Node string
	// Claim is namespace/name of the claim being allocated; Request is
	// its request.
	Claim, Request string
	Err            error
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("claim %s, request %s: %v", e.Claim, e.Request, e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }

// IsNodeError reports whether err says that the node cannot be used.
func IsNodeError(err error) bool {
	var n *NodeError
	return errors.As(err, &n)
}

// IsUnfit reports whether err says that the claims do not fit.
func IsUnfit(err error) bool {
	var u *UnfitError
	return errors.As(err, &u)
}
