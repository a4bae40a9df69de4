// Package diff runs upstream and dractl side by side on a scenario,
// classifies disagreements and shrinks failing scenarios.
package diff

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dractl/dractl/conformance/dractlrun"
	"github.com/dractl/dractl/conformance/scenario"
	"github.com/dractl/dractl/conformance/upstream"
	"github.com/dractl/dractl/conformance/verify"
)

// NodeResult is the comparison for one node.
type NodeResult struct {
	Node     string
	Upstream scenario.Outcome
	Dractl   scenario.Outcome
	// Signature is empty when both agree; otherwise a short class of the
	// disagreement used to keep it while shrinking.
	Signature string
	Detail    string
	// UpstreamViolations are verifier findings on upstream's own result
	// (a verifier or upstream bug, not a dractl failure).
	UpstreamViolations []string
	SameDevices        bool // both fit with identical devices
	// Wall time of each Allocate call, so that timeouts on either side can
	// be reported with how long the other side took.
	UpstreamTime, DractlTime time.Duration
}

// Options of a run.
type Options struct {
	Timeout time.Duration // per Allocate call
	// NoDractl compares nothing and only verifies upstream.
	NoDractl bool
}

// Run compares both allocators on every node of the scenario (or only the
// named node).
func Run(ctx context.Context, sc *scenario.Scenario, only string, opts Options) ([]NodeResult, error) {
	up, err := upstream.Prepare(ctx, upstream.Experimental, sc)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	ver, err := verify.New(sc)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	var dr *dractlrun.Prepared
	var drErr error
	if !opts.NoDractl {
		dr, drErr = dractlrun.Prepare(sc)
	}
	var out []NodeResult
	for _, node := range sc.Nodes {
		if only != "" && node.Name != only {
			continue
		}
		out = append(out, runNode(ctx, sc, node, up, dr, drErr, ver, opts))
	}
	return out, nil
}

func runNode(ctx context.Context, sc *scenario.Scenario, node *corev1.Node, up *upstream.Prepared, dr *dractlrun.Prepared, drErr error, ver *verify.Verifier, opts Options) NodeResult {
	nr := NodeResult{Node: node.Name}
	tctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	began := time.Now()
	nr.Upstream = up.Allocate(tctx, node, sc.Claims)
	nr.UpstreamTime = time.Since(began)
	cancel()
	if nr.Upstream.Kind == scenario.Fit {
		nr.UpstreamViolations = ver.Check(ctx, node, sc.Claims, nr.Upstream.Results)
	}
	if opts.NoDractl {
		return nr
	}
	if drErr != nil {
		nr.Dractl = scenario.Outcome{Kind: scenario.Fatal, Err: fmt.Errorf("state: %w", drErr)}
	} else {
		tctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		began := time.Now()
		nr.Dractl = dr.Allocate(tctx, node, sc.Claims)
		nr.DractlTime = time.Since(began)
		cancel()
	}
	u, d := nr.Upstream, nr.Dractl
	switch {
	case u.Kind == scenario.Timeout:
		// Upstream gave up: dractl cannot be compared, only verified.
	case u.Kind != d.Kind:
		nr.Signature = fmt.Sprintf("outcome upstream=%s dractl=%s", u.Kind, d.Kind)
		nr.Detail = fmt.Sprintf("upstream: %s; dractl: %s", u, d)
	case u.Kind == scenario.Fit:
		same, why := scenario.SameDevices(u.Results, d.Results)
		nr.SameDevices = same
		if !same {
			nr.Signature = "first-fit devices differ"
			nr.Detail = why
		}
	}
	if d.Kind == scenario.Fit {
		if v := ver.Check(ctx, node, sc.Claims, d.Results); len(v) > 0 {
			if nr.Signature == "" {
				nr.Signature = "dractl result invalid"
			} else {
				nr.Signature += "; dractl result invalid"
			}
			nr.Detail = strings.Join(append([]string{nr.Detail}, v...), "; ")
		}
	}
	return nr
}

// Shrink removes parts of sc while the disagreement on node keeps its
// signature. It stops after budget evaluations.
func Shrink(ctx context.Context, sc *scenario.Scenario, node, signature string, opts Options, budget int) *scenario.Scenario {
	return ShrinkWhile(sc, node, budget, func(c *scenario.Scenario) bool {
		res, err := Run(ctx, c, node, opts)
		return err == nil && len(res) == 1 && res[0].Signature == signature
	})
}

// DractlSlow reports whether dractl alone needs more than limit on node:
// the predicate for shrinking a search that explodes, which must not wait
// for upstream (it is usually slow on the same input).
func DractlSlow(ctx context.Context, sc *scenario.Scenario, node string, limit time.Duration) bool {
	dr, err := dractlrun.Prepare(sc)
	if err != nil {
		return false
	}
	for _, n := range sc.Nodes {
		if n.Name == node {
			tctx, cancel := context.WithTimeout(ctx, limit)
			defer cancel()
			return dr.Allocate(tctx, n, sc.Claims).Kind == scenario.Timeout
		}
	}
	return false
}

// ShrinkWhile removes parts of sc while keep holds. It stops after budget
// evaluations.
func ShrinkWhile(sc *scenario.Scenario, node string, budget int, keep func(*scenario.Scenario) bool) *scenario.Scenario {
	still := func(c *scenario.Scenario) bool {
		if budget <= 0 {
			return false
		}
		budget--
		return keep(c)
	}
	cur := sc
	for changed := true; changed && budget > 0; {
		changed = false
		for _, cand := range candidates(cur, node) {
			if still(cand) {
				cur, changed = cand, true
				break
			}
		}
	}
	return cur
}
