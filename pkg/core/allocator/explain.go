package allocator

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dractl/dractl/pkg/core/pool"
)

// Reason is why a device was not used for a request. Each device is counted
// under the first reason that rejects it, in the order below, which is the
// order in which the checks run (cheapest first).
type Reason uint8

const (
	// ReasonIncompletePool: the device's pool is missing slices.
	ReasonIncompletePool Reason = iota
	// ReasonInvalidPool: the device's pool failed validation.
	ReasonInvalidPool
	// ReasonAllocated: another claim holds the device.
	ReasonAllocated
	// ReasonDriverOrClass: the DeviceClass selectors reject the device.
	ReasonDriverOrClass
	// ReasonSelector: the request's own selectors reject the device.
	ReasonSelector
	// ReasonNode: the device (per-device node selection) is not on this node.
	ReasonNode
	// ReasonNodeOperations: the slice skips node operations the node
	// does not declare support for.
	ReasonNodeOperations
	// ReasonCapacity: the request's capacity does not fit the device's
	// capacity or request policy.
	ReasonCapacity
	// ReasonTaint: a NoSchedule or NoExecute taint is not tolerated.
	ReasonTaint
	// ReasonCounterExhausted: the counters the device consumes are no
	// longer available (see Counters for which).
	ReasonCounterExhausted
	// ReasonConstraint: usable alone, but no combination satisfies the
	// claim's constraints together with the other requests.
	ReasonConstraint
	// ReasonFeatureGate: the device needs a feature gate that is off
	// (binding conditions, counters, node operations).
	ReasonFeatureGate
	numReasons
)

var reasonNames = [numReasons]string{
	"IncompletePool", "InvalidPool", "Allocated", "DriverOrClass", "Selector", "Node",
	"NodeOperations", "Capacity", "Taint", "CounterExhausted", "Constraint", "FeatureGate",
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", r)
}

// Explanation says why claims did not fit on a node.
type Explanation struct {
	Node   string
	Claims []ClaimExplanation
	// InvalidPools are the pools the node sees that failed validation, each
	// with all of its problems. Their devices are counted under
	// ReasonInvalidPool; when no node fits, these are usually the cause.
	InvalidPools []*pool.InvalidError
}

// ClaimExplanation covers one claim.
type ClaimExplanation struct {
	// Claim is namespace/name.
	Claim    string
	Requests []RequestExplanation
}

// RequestExplanation covers one request, or one subrequest of a
// firstAvailable request (Request is then "request/subrequest").
type RequestExplanation struct {
	Request string
	// Needed is the number of devices asked for (for All: the number that
	// matched).
	Needed int
	// Candidates counts devices that passed every per-device check.
	Candidates int
	// Rejected counts the other devices by their first failing check.
	Rejected map[Reason]int
	// Counters counts ReasonCounterExhausted rejections by "<set>/<counter>"
	// of the first counter that did not fit.
	Counters map[string]int
	// Taints names, for each device rejected with ReasonTaint
	// ("driver/pool/device"), the first taint the request does not
	// tolerate ("key=value:Effect"): a device a DeviceTaintRule taints has
	// no taint in its slice, so its name is the only way to it.
	Taints map[string]string
	// SatisfiableAlone reports whether this request could be allocated on
	// the node if it were the only request (its claim's constraints that
	// name only it still apply).
	SatisfiableAlone bool
}

// invalidPoolNames lists the invalid pools, comma-separated.
func (e *Explanation) invalidPoolNames() string {
	names := make([]string, len(e.InvalidPools))
	for i, p := range e.InvalidPools {
		names[i] = p.Pool.String()
	}
	return strings.Join(names, ", ")
}

// Summary is a one-line digest naming the requests that cannot be satisfied.
func (e *Explanation) Summary() string {
	if e == nil {
		return "no explanation"
	}
	var parts []string
	for _, c := range e.Claims {
		for _, r := range c.Requests {
			if r.SatisfiableAlone {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s/%s: %d of %d devices (%s)", c.Claim, r.Request, r.Candidates, r.Needed, r.rejections()))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "each request fits alone but not together (constraints, counters or devices shared between requests)")
	}
	for _, ip := range e.InvalidPools {
		parts = append(parts, ip.Error())
	}
	return strings.Join(parts, "; ")
}

func (r RequestExplanation) rejections() string {
	var parts []string
	for reason := Reason(0); reason < numReasons; reason++ {
		if n := r.Rejected[reason]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", reason, n))
		}
	}
	if len(parts) == 0 {
		return "no devices rejected"
	}
	return strings.Join(parts, " ")
}

// String renders the explanation as a table, one line per request.
func (e *Explanation) String() string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "node %s:\n", e.Node)
	for _, ip := range e.InvalidPools {
		fmt.Fprintf(&b, "  %s\n", ip.Error())
	}
	for _, c := range e.Claims {
		for _, r := range c.Requests {
			alone := "no"
			if r.SatisfiableAlone {
				alone = "yes"
			}
			fmt.Fprintf(&b, "  %s\t%s\tneed %d\tcandidates %d\talone %s\t%s", c.Claim, r.Request, r.Needed, r.Candidates, alone, r.rejections())
			if len(r.Counters) > 0 {
				keys := make([]string, 0, len(r.Counters))
				for k := range r.Counters {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				b.WriteString("\tcounters:")
				for _, k := range keys {
					fmt.Fprintf(&b, " %s=%d", k, r.Counters[k])
				}
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}
