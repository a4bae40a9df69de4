package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/decode"
	"github.com/dractl/dractl/pkg/state"
)

// cluster is the state allocate and explain work on: everything read with
// -f, checked by admission, fed to a state.State, with the claims that are
// not allocated yet set apart.
type cluster struct {
	set      *decode.Set
	pending  []*resourcev1.ResourceClaim
	snap     *state.Snapshot
	strategy allocator.Strategy
}

// readCluster reads and admits the inputs. Unlike validate, an invalid
// input is not a finding here but a reason not to answer: the exit code is
// 2 and every problem is printed to w.
func (o *globalOptions) readCluster(w io.Writer, strategy allocator.Strategy) (*cluster, error) {
	in, err := o.read()
	if err != nil {
		return nil, err
	}
	set, err := admit(w, in)
	if err != nil {
		return nil, err
	}
	c := &cluster{set: set, strategy: strategy}
	st := state.New(state.Options{})
	for _, s := range c.set.Slices {
		if err := st.SetMixinSlice(s); err != nil {
			return nil, &exitError{code: ExitUsage, msg: err.Error()}
		}
	}
	for _, dc := range c.set.Classes {
		if err := st.SetClass(dc); err != nil {
			return nil, &exitError{code: ExitUsage, msg: err.Error()}
		}
	}
	for _, claim := range c.set.Claims {
		if err := st.SetClaim(claim); err != nil {
			src, _ := c.set.Source(claim)
			return nil, &exitError{code: ExitUsage, msg: fmt.Sprintf("%s ResourceClaim/%s: %v", src, claim.Name, err)}
		}
		if claim.Status.Allocation == nil {
			c.pending = append(c.pending, claim)
		}
	}
	c.snap = st.Snapshot()
	return c, nil
}

// admit prints every decode and admission problem of the inputs to w and
// fails, exit code 2, when there was any; otherwise it groups the objects.
func admit(w io.Writer, in *input) (*decode.Set, error) {
	bad := 0
	for _, e := range in.decodeErrors {
		fmt.Fprintln(w, oneLine(e.line))
		bad++
	}
	for i, errs := range validateObjects(in.objects) {
		obj := &in.objects[i]
		for _, e := range errs {
			fmt.Fprintf(w, "%s: %s\n", where(obj), oneLine(e.Error()))
			bad++
		}
	}
	if bad > 0 {
		return nil, &exitError{code: ExitUsage, msg: fmt.Sprintf("%s in the input; nothing was allocated", plural(bad, "error"))}
	}
	return decode.Group(in.objects), nil
}

// allocate allocates claims together on node.
func (c *cluster) allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) ([]*resourcev1.AllocationResult, error) {
	return c.snap.Cycle(claims, state.CycleOptions{Strategy: c.strategy}).Allocate(ctx, node)
}

// nodes returns the nodes to try: the one named, or every Node of the input
// in input order (the order a user wrote them is the order they expect).
func (c *cluster) nodes(name string) ([]*corev1.Node, error) {
	if name == "" {
		if len(c.set.Nodes) == 0 {
			return nil, usageErrorf("no Node objects in the input: add the nodes to -f or name one with --node")
		}
		return c.set.Nodes, nil
	}
	for _, n := range c.set.Nodes {
		if n.Name == name {
			return []*corev1.Node{n}, nil
		}
	}
	return nil, usageErrorf("--node %s: no Node of that name in the input", name)
}

// fatal turns an allocator error that no node can work around into exit 2.
func fatal(err error) error {
	var fe *allocator.FatalError
	if errors.As(err, &fe) {
		return &exitError{code: ExitUsage, msg: fe.Error()}
	}
	return &exitError{code: ExitUsage, msg: err.Error()}
}

func parseStrategy(s string) (allocator.Strategy, error) {
	switch s {
	case "first-fit":
		return allocator.FirstFit, nil
	case "best-fit":
		return allocator.BestFit, nil
	}
	return 0, usageErrorf("--strategy: expected first-fit or best-fit, found %q", s)
}
