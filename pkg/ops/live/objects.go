package live

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/dractl/dractl/pkg/core/state"
)

// Objects are the DRA objects of a cluster, or of the part a command
// needs.
type Objects struct {
	Slices    []*resourcev1.ResourceSlice
	Classes   []*resourcev1.DeviceClass
	Claims    []*resourcev1.ResourceClaim
	Templates []*resourcev1.ResourceClaimTemplate
	// TaintRules are the DeviceTaintRules, which taint the slices' devices.
	TaintRules []*resourcev1.DeviceTaintRule
	Nodes      []*corev1.Node
	Pods       []*corev1.Pod
}

// Kinds select what Read lists.
type Kinds uint

const (
	KindSlices Kinds = 1 << iota
	KindClasses
	KindClaims
	KindTemplates
	KindNodes
	KindPendingPods
	KindTaintRules

	// KindAll is every kind Snapshot writes.
	KindAll = KindSlices | KindClasses | KindClaims | KindTemplates | KindNodes | KindPendingPods | KindTaintRules
)

// Read lists the kinds asked for, in every namespace.
func (c *Client) Read(ctx context.Context, kinds Kinds) (*Objects, error) {
	o := &Objects{}
	var err error
	steps := []struct {
		kind Kinds
		run  func() error
	}{
		{KindSlices, func() error { o.Slices, err = c.Slices(ctx, ""); return err }},
		{KindClasses, func() error { o.Classes, err = c.Classes(ctx); return err }},
		{KindClaims, func() error { o.Claims, err = c.Claims(ctx, ""); return err }},
		{KindTemplates, func() error { o.Templates, err = c.ClaimTemplates(ctx, ""); return err }},
		{KindNodes, func() error { o.Nodes, err = c.Nodes(ctx); return err }},
		{KindPendingPods, func() error { o.Pods, err = c.PendingPods(ctx, ""); return err }},
		{KindTaintRules, func() error { o.TaintRules, err = c.TaintRules(ctx); return err }},
	}
	for _, s := range steps {
		if kinds&s.kind == 0 {
			continue
		}
		if err := s.run(); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// NodeSlices lists the ResourceSlices that may publish devices for node:
// those with spec.nodeName set to it, and those without spec.nodeName
// (node selectors, all nodes, per-device node selection), which the
// caller matches against the node. Listing by field selector keeps the
// reply to one node's slices in a cluster of thousands.
func (c *Client) NodeSlices(ctx context.Context, node string) ([]*resourcev1.ResourceSlice, error) {
	own, err := c.Slices(ctx, fields.OneTermEqualSelector("spec.nodeName", node).String())
	if err != nil {
		return nil, err
	}
	unbound, err := c.Slices(ctx, fields.OneTermEqualSelector("spec.nodeName", "").String())
	if err != nil {
		return nil, err
	}
	return append(own, unbound...), nil
}

// State feeds the DeviceTaintRules, slices, classes and claims to a new
// state.State. Objects the API server stored are valid, so a delta the
// State rejects (two claims holding one device) is reported, not skipped.
func (o *Objects) State() (*state.State, error) {
	st := state.New(state.Options{})
	for _, r := range o.TaintRules {
		if err := st.SetTaintRule(r); err != nil {
			return nil, fmt.Errorf("DeviceTaintRule %s: %w", r.Name, err)
		}
	}
	for _, s := range o.Slices {
		if err := st.SetSlice(s); err != nil {
			return nil, fmt.Errorf("ResourceSlice %s: %w", s.Name, err)
		}
	}
	for _, c := range o.Classes {
		if err := st.SetClass(c); err != nil {
			return nil, fmt.Errorf("DeviceClass %s: %w", c.Name, err)
		}
	}
	for _, c := range o.Claims {
		if err := st.SetClaim(c); err != nil {
			return nil, fmt.Errorf("ResourceClaim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	return st, nil
}
