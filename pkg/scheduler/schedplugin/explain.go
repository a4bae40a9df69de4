package schedplugin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dractl/dractl/pkg/core/allocator"
)

// A verdict says why one claim of the pod cannot be used on one node. Its
// text names no counts and no node, so that the verdicts of many nodes
// fall into a few kinds: the framework counts nodes per status reason,
// and PostFilter counts them per claim.
type verdict struct {
	claim string // the pod's name for the claim (pod.spec.resourceClaims[].name)
	why   string
}

func (v verdict) String() string { return "claim " + v.claim + ": " + v.why }

// The reason table: every reason the plugin gives kube-scheduler or the
// pod's Events, gathered here so that they are read, and compared with
// the in-tree DynamicResources plugin's, in one place. Where the in-tree
// plugin has a reason for the case, the plugin words it the same, since
// users and tools match on it; dractl's own account of a rejection is
// the verdicts below.
//
// Rejections of a node, which kube-scheduler counts per node into the
// pod's PodScheduled message ("0/3 nodes are available: 3 cannot allocate
// all claims."). Filter reports these unless the plugin's args ask for
// the explanation inline.
const (
	reasonCannotAllocate = "cannot allocate all claims"
	reasonInvalidPools   = "invalid resource pools were encountered"
	reasonNotAvailable   = "resourceclaim not available on the node"
	// reasonStaleExtended: a pod whose extended-resource claim an earlier
	// attempt created; PostFilter deletes it and the next attempt starts
	// anew.
	reasonStaleExtended = "cannot schedule extended resource claim"
	// reasonCannotFitResource: a node that neither advertises an
	// extended resource of the pod nor has DRA serve it.
	reasonCannotFitResource = "cannot fit resource"
	// whyMappedShared (a claim's name): a pod that would share a claim
	// standing for another pod's node resources (KEP-5517).
	whyMappedShared = "node allocatable resource claim %s has a mapped device and cannot be shared across pods"
	// reasonStopped (the cause): the cycle was cancelled mid-allocation.
	reasonStopped = "asked by caller to stop allocating devices: %v"
)

// Rejections of the pod, on every node, in PreFilter.
const (
	reasonInUse = "resourceclaim in use"
	// reasonBeingAllocated (the claim): another cycle's allocation of the
	// claim is in flight.
	reasonBeingAllocated = "resource claim %s is in the process of being allocated"
	// reasonNoClass (the request, the class).
	reasonNoClass = "request %s: device class %s does not exist"
	// reasonUnknownRequest (the claim, the request).
	reasonUnknownRequest = "resource claim %s, request %s: unknown request type"
)

// What PostFilter and PodGroupPostFilter did, in the status that ends
// them.
const (
	reasonDeletedStale     = "deletion of ResourceClaim completed"
	reasonDeallocated      = "deallocation of ResourceClaim completed"
	reasonGroupDone        = "deallocation and deletion of ResourceClaims completed"
	reasonGroupDeallocated = "deallocation of PodGroup ResourceClaim completed"
	reasonGroupUnreserved  = "ResourceClaim unreserved for PodGroup"
)

// Why SignPod gives a pod no signature.
const (
	reasonUnsignableClaims   = "pods with dra resource claims are not signable"
	reasonUnsignableExtended = "pods with extended resources backed by dra are not signable"
)

// The reasons of the pod's Events.
const (
	// eventReason: dractl's account of why no node fits (PostFilter,
	// PodGroupPostFilter).
	eventReason = "DevicesUnavailable"
	// eventBindingConditionsPending: PreBind waits for the devices'
	// binding conditions, as the in-tree plugin reports it.
	eventBindingConditionsPending = "BindingConditionsPending"
)

// Verdicts for allocated claims that the node cannot use.
const (
	whyElsewhere       = "allocated devices are not available on this node"
	whyNodeOps         = "allocated devices skip node operations this node does not declare"
	whyBindingFailed   = "binding conditions of allocated devices failed"
	whyBindingTimedOut = "binding conditions of allocated devices not met in time"
	// whyTogether is the pod-level verdict when every request fits on its
	// own but the claims do not fit together.
	whyTogether = "each claim fits alone, but not all of them together"
	// whyStaleExtended: the extended-resource claim of an earlier
	// attempt, which PostFilter deletes.
	whyStaleExtended = "made by an earlier attempt whose binding failed; deleted, to be made anew"
)

// verdicts turns the allocator's explanation for one node into one
// verdict per claim that cannot be allocated there. names maps the
// allocator's claim names (namespace/name) to the pod's names.
func verdicts(e *allocator.Explanation, names map[string]string) []verdict {
	var out []verdict
	for _, c := range e.Claims {
		var whys []string
		requests := groupRequests(c.Requests)
		for _, g := range requests {
			if g.fits {
				continue
			}
			why := headline(g.first)
			if len(requests) > 1 {
				why = "request " + g.name + ": " + why
			}
			whys = append(whys, why)
		}
		if len(whys) > 0 {
			out = append(out, verdict{claim: cmp.Or(names[c.Claim], c.Claim), why: strings.Join(whys, ", ")})
		}
	}
	if len(out) == 0 {
		var all []string
		for _, c := range e.Claims {
			all = append(all, cmp.Or(names[c.Claim], c.Claim))
		}
		out = append(out, verdict{claim: strings.Join(all, ", "), why: whyTogether})
	}
	return out
}

// requestGroup is one request of a claim: its alternatives (firstAvailable
// subrequests, or just itself) as the allocator explained them.
type requestGroup struct {
	name  string
	first allocator.RequestExplanation // the preferred alternative
	fits  bool                         // some alternative fits on its own
}

func groupRequests(rs []allocator.RequestExplanation) []requestGroup {
	var out []requestGroup
	for _, r := range rs {
		name, _, _ := strings.Cut(r.Request, "/")
		if n := len(out); n > 0 && out[n-1].name == name {
			out[n-1].fits = out[n-1].fits || r.SatisfiableAlone
			continue
		}
		out = append(out, requestGroup{name: name, first: r, fits: r.SatisfiableAlone})
	}
	return out
}

// headline names what stopped the request's devices. The allocator counts
// each device under the first check it fails, cheapest first; the last
// check that stopped any device is the one closest to succeeding, and so
// the one a user can act on (a device that is allocated was never asked
// whether the selector matches it).
func headline(r allocator.RequestExplanation) string {
	if r.Candidates >= r.Needed {
		return "enough devices one by one, but no combination satisfies the constraints and shared counters"
	}
	top, found := allocator.Reason(0), false
	for reason, n := range r.Rejected {
		if n > 0 && reason != allocator.ReasonConstraint && (!found || reason > top) {
			top, found = reason, true
		}
	}
	if !found {
		if r.Candidates == 0 {
			return "no devices"
		}
		return "too few devices"
	}
	matched := zeroOrFew(r.Candidates == 0)
	if r.Rejected[allocator.ReasonAllocated] > 0 {
		matched += " free"
	}
	switch top {
	case allocator.ReasonIncompletePool:
		return "pools incomplete (slices missing)"
	case allocator.ReasonInvalidPool:
		return "pools invalid"
	case allocator.ReasonAllocated:
		if r.Candidates == 0 {
			return "all devices allocated"
		}
		return "too few devices free"
	case allocator.ReasonDriverOrClass:
		return "device class matched " + matched + " devices"
	case allocator.ReasonSelector:
		return "selector matched " + matched + " devices"
	case allocator.ReasonNode:
		return "devices not available to this node"
	case allocator.ReasonNodeOperations:
		return "devices skip node operations this node does not declare"
	case allocator.ReasonCapacity:
		return "requested capacity does not fit"
	case allocator.ReasonTaint:
		return "device taints not tolerated"
	case allocator.ReasonCounterExhausted:
		if set, counter, ok := topCounter(r.Counters); ok {
			return fmt.Sprintf("counter %s of %s exhausted", counter, set)
		}
		return "counters exhausted"
	}
	return "devices rejected (" + top.String() + ")"
}

func zeroOrFew(none bool) string {
	if none {
		return "0"
	}
	return "too few"
}

// topCounter returns the counter ("set/counter") most rejections name,
// the first by name among equals.
func topCounter(counters map[string]int) (set, counter string, ok bool) {
	best, most := "", 0
	for k, n := range counters {
		if n > most || (n == most && k < best) {
			best, most = k, n
		}
	}
	if most == 0 {
		return "", "", false
	}
	set, counter, _ = strings.Cut(best, "/")
	return set, counter, true
}

// summary counts, per claim, the nodes behind each verdict: "claim gpu:
// counter memory of gpu-0-counters exhausted on 12 nodes; selector matched
// 0 devices on 488 nodes". Claims appear in the order given, verdicts by
// node count (most first). Invalid pools follow, each once.
func summary(order []string, byNode map[string][]verdict, invalid []string) string {
	counts := map[string]map[string]int{}
	for _, vs := range byNode {
		for _, v := range vs {
			if counts[v.claim] == nil {
				counts[v.claim] = map[string]int{}
			}
			counts[v.claim][v.why]++
		}
	}
	claims := slices.Clone(order)
	for c := range counts {
		if !slices.Contains(claims, c) {
			claims = append(claims, c)
		}
	}
	var parts []string
	for _, c := range claims {
		whys := counts[c]
		if len(whys) == 0 {
			continue
		}
		keys := make([]string, 0, len(whys))
		for w := range whys {
			keys = append(keys, w)
		}
		slices.SortFunc(keys, func(x, y string) int {
			return cmp.Or(cmp.Compare(whys[y], whys[x]), strings.Compare(x, y))
		})
		items := make([]string, len(keys))
		for i, w := range keys {
			items[i] = fmt.Sprintf("%s on %d %s", w, whys[w], plural(whys[w], "node", "nodes"))
		}
		parts = append(parts, "claim "+c+": "+strings.Join(items, "; "))
	}
	inv := slices.Clone(invalid)
	slices.Sort(inv)
	parts = append(parts, slices.Compact(inv)...)
	return strings.Join(parts, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
