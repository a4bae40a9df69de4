package allocator

import "github.com/dractl/dractl/pkg/core/validation"

// The allocator answers as kube-scheduler of one Kubernetes minor does
// (Options.KubeVersion). What differs between the supported minors is the
// table below, and nothing else: every place whose answer depends on the
// minor reads one of its rules through config.rules.
//
// The rules come from the difference of k8s.io/dynamic-resource-allocation
// structured/internal (the stable and incubating allocators) between
// v0.37 and v0.38, and of the allocator test suite beside them
// (allocatortesting), which holds a case for each.

// A minorRule is a change of the allocator's answers between minors. A
// minor makes it when it lies within [from, to] (a zero bound is open).
type minorRule struct {
	from, to int
	// what is the rule in a few words, for docs and tests.
	what string
}

// The rules, one per change of upstream's allocator.
const (
	// A request for all devices that meets an invalid pool or one being
	// updated: 1.37 fails the pod with an error; 1.38 wraps
	// ErrFailedAllocationOnNode, so that kube-scheduler marks only the node
	// unschedulable and other nodes may still do (*NodeError here).
	ruleAllPoolsNodeLocal = iota
	// Capacity names: 1.38 resolves request names, device capacities and
	// consumed capacity as draapi.FullyQualifiedName with the device's
	// driver as the default domain, so "capacity-0" and
	// "<driver>/capacity-0" are one capacity; 1.37 compares them as
	// written.
	ruleCapacityDriverDomain
	// Version attributes in matchAttribute and distinctAttribute: 1.38
	// compares them by semver precedence (semver.Version.Equals), which
	// ignores build metadata; 1.37 compares the strings.
	ruleVersionIgnoresBuild
	// With DRAListTypeAttributes off, 1.38 stops with "unsupported
	// attribute value" when a constraint meets a list value; 1.37 lets the
	// first such device in and then matches nothing against it.
	ruleListValueWithoutGate
	// A negative capacity request: 1.38 refuses it before the request
	// policy rounds it up to a valid value; 1.37 rounds it first and so
	// may allocate it.
	ruleNegativeRequestRefused
	// A device that no longer allows multiple allocations but still has a
	// share held by an allocated claim: 1.38 does not hand it to a
	// dedicated request (deviceCapacityInUse); 1.37 does.
	ruleShareBlocksDedicated
	numRules
)

var minorRules = [numRules]minorRule{
	ruleAllPoolsNodeLocal:      {from: 38, what: "an All request over an invalid or incomplete pool fails the node, not the pod"},
	ruleCapacityDriverDomain:   {from: 38, what: "capacity names without a domain are qualified with the device's driver"},
	ruleVersionIgnoresBuild:    {from: 38, what: "constraints ignore semver build metadata"},
	ruleListValueWithoutGate:   {from: 38, what: "a constraint meeting a list value without DRAListTypeAttributes is an error"},
	ruleNegativeRequestRefused: {from: 38, what: "negative capacity requests refused before rounding"},
	ruleShareBlocksDedicated:   {from: 38, what: "a device with a held share is not allocated dedicated"},
}

// rules are the minorRules that one minor makes, decided once in Init.
type rules [numRules]bool

// rulesOf decides the rules of minor v: the nearest supported minor's, so
// that the zero KubeVersion judges as the oldest (1.37).
func rulesOf(v validation.KubeVersion) rules {
	v = v.Nearest()
	var r rules
	for i, m := range minorRules {
		r[i] = v.Within(m.from, m.to)
	}
	return r
}

func (r *rules) has(rule int) bool { return r[rule] }
