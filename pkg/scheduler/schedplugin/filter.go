package schedplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/podclaims"
)

// Filter checks that the node can use the pod's allocated claims and
// allocates its pending ones there.
func (pl *Plugin) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	logger := klog.FromContext(ctx)
	s, err := readState(cs)
	if err != nil {
		return asError(logger, err)
	}
	if len(s.claims) == 0 && s.ext == nil {
		return nil
	}
	node := nodeInfo.Node()
	if s.stale != nil {
		s.mu.Lock()
		s.reject(node.Name, []verdict{{claim: podclaims.ExtendedEntryName, why: whyStaleExtended}}, nil)
		s.mu.Unlock()
		return unresolvable(logger, reasonStaleExtended)
	}
	var unavailable []int
	var rejected []verdict
	for i, pc := range s.claims {
		written := pc.claim.Status.Allocation != nil
		a := pc.claim.Status.Allocation
		if !written {
			a = s.shared[i]
		}
		if a == nil {
			continue
		}
		why := ""
		switch {
		case s.availableOn[i] != nil && !s.availableOn[i].Match(node):
			why = whyElsewhere
		case skipsNodeOperations(a) && !slices.Contains(node.Status.DeclaredFeatures, features.NodeFeatureOptionalNodeOperations):
			why = whyNodeOps
		case written && pl.fts.BindingConditions:
			ready, err := claimReadyForBinding(pc.claim)
			switch {
			case err != nil:
				why = whyBindingFailed
			case !ready && pl.binder.bindingTimedOut(pc.claim):
				why = whyBindingTimedOut
			}
		}
		if why != "" {
			unavailable = append(unavailable, i)
			rejected = append(rejected, verdict{claim: pc.name, why: why})
		}
	}
	if len(unavailable) > 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.unavailable == nil {
			s.unavailable = map[int]bool{}
		}
		for _, i := range unavailable {
			s.unavailable[i] = true
		}
		s.reject(node.Name, rejected, nil)
		if pl.cfg.inline {
			return unresolvable(logger, verdictStrings(rejected)...)
		}
		return unresolvable(logger, reasonNotAvailable)
	}
	cycle := s.cycle
	if s.ext != nil {
		need, err := s.ext.ext.OnNode(nodeInfo.GetAllocatable().GetScalarResources())
		if err != nil {
			vs := []verdict{{claim: podclaims.ExtendedEntryName, why: err.Error()}}
			s.mu.Lock()
			s.reject(node.Name, vs, nil)
			s.mu.Unlock()
			if pl.cfg.inline {
				return unresolvable(logger, verdictStrings(vs)...)
			}
			return unresolvable(logger, reasonCannotFitResource)
		}
		cycle = s.extendedVariant(node.Name, need).cycle
	}
	if cycle == nil {
		return pl.nodeResources.fit(logger, s, pod, nodeInfo, nil)
	}
	res, err := cycle.Allocate(ctx, node)
	var unfit *allocator.UnfitError
	switch {
	case errors.As(err, &unfit):
		vs := verdicts(unfit.Explanation, s.claimNames())
		var invalid []string
		for _, ip := range unfit.Explanation.InvalidPools {
			invalid = append(invalid, ip.Error())
		}
		s.mu.Lock()
		s.reject(node.Name, vs, invalid)
		wait := !s.waiting
		s.waiting = true
		s.mu.Unlock()
		if wait {
			pl.waiting.turnedAway(pod, s.mark)
		}
		switch {
		case pl.cfg.inline:
			return unresolvable(logger, verdictStrings(vs)...)
		case len(invalid) > 0:
			// Upstream's allocator fails a node with invalid pools this
			// way only when nothing fits there, as dractl's does.
			return unresolvable(logger, reasonInvalidPools)
		}
		return unresolvable(logger, reasonCannotAllocate)
	case allocator.IsNodeError(err):
		// From 1.38 the in-tree plugin fails only the node for what the
		// allocator wraps in ErrFailedAllocationOnNode (an All request
		// over an invalid pool), in the allocator's words; other nodes
		// may fit. A 1.37 allocator reports it as an error instead.
		s.mu.Lock()
		wait := !s.waiting
		s.waiting = true
		s.mu.Unlock()
		if wait {
			pl.waiting.turnedAway(pod, s.mark)
		}
		return unresolvable(logger, err.Error())
	case ctx.Err() != nil:
		return unresolvable(logger, fmt.Sprintf(reasonStopped, context.Cause(ctx)))
	case errors.Is(err, context.DeadlineExceeded):
		// Possibly transient: an error retries after a backoff rather
		// than waiting for a cluster event.
		return asError(logger, fmt.Errorf("node %s: timed out trying to allocate devices", node.Name))
	case err != nil:
		// A broken claim, class or pool: no node can do better.
		return asError(logger, err)
	case len(res) != len(s.pending) && len(res) != len(s.pending)+1:
		return asError(logger, fmt.Errorf("node %s: %d allocation results for %d claims", node.Name, len(res), len(s.pending)))
	}
	if st := pl.nodeResources.fit(logger, s, pod, nodeInfo, res); st != nil {
		return st
	}
	s.mu.Lock()
	if s.results != nil { // nil only once Reserve has released it
		s.results[node.Name] = res
	}
	s.mu.Unlock()
	return nil
}

// reject records a node's verdicts; the caller holds s.mu.
func (s *cycleState) reject(node string, vs []verdict, invalid []string) {
	if s.rejected == nil {
		s.rejected = map[string][]verdict{}
	}
	s.rejected[node] = vs
	s.invalid = append(s.invalid, invalid...)
}

// claimNames maps the allocator's names of the pending claims to the
// pod's names for them.
func (s *cycleState) claimNames() map[string]string {
	m := make(map[string]string, len(s.pending)+1)
	for _, i := range s.pending {
		c := s.claims[i].claim
		m[c.Namespace+"/"+c.Name] = s.claims[i].name
	}
	if s.ext != nil {
		m[s.ext.namespace+"/"+s.ext.name] = podclaims.ExtendedEntryName
	}
	return m
}

func verdictStrings(vs []verdict) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}

func skipsNodeOperations(a *resourcev1.AllocationResult) bool {
	for _, r := range a.Devices.Results {
		if len(r.SkipNodeOperations) > 0 {
			return true
		}
	}
	return false
}
