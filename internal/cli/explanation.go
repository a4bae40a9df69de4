package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/dractl/dractl/pkg/core/allocator"
)

// writeExplanation renders why claims did not fit on one node as a table:
// one row per request, rejections by reason in the order the allocator
// checks them (cheapest first), so the first column that is large is
// usually the answer.
func writeExplanation(w io.Writer, e *allocator.Explanation) {
	fmt.Fprintf(w, "node %s: does not fit\n", e.Node)
	for _, ip := range e.InvalidPools {
		fmt.Fprintf(w, "  invalid %s\n", ip.Error())
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLAIM\tREQUEST\tNEED\tCANDIDATES\tALONE\tREJECTED")
	allAlone := true
	for _, c := range e.Claims {
		for _, r := range c.Requests {
			alone := "no"
			if r.SatisfiableAlone {
				alone = "yes"
			} else {
				allAlone = false
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\n", c.Claim, r.Request, r.Needed, r.Candidates, alone, rejections(r))
		}
	}
	tw.Flush()
	if allAlone {
		fmt.Fprintln(w, "  every request fits alone: together they need the same devices, counters or capacity, or break a constraint")
	}
}

func rejections(r allocator.RequestExplanation) string {
	if len(r.Rejected) == 0 {
		return "-"
	}
	reasons := slices.Sorted(maps.Keys(r.Rejected))
	parts := make([]string, 0, len(reasons))
	for _, reason := range reasons {
		part := fmt.Sprintf("%s=%d", reason, r.Rejected[reason])
		if reason == allocator.ReasonCounterExhausted && len(r.Counters) > 0 {
			var cs []string
			for _, k := range slices.Sorted(maps.Keys(r.Counters)) {
				cs = append(cs, fmt.Sprintf("%s=%d", k, r.Counters[k]))
			}
			part += " (" + strings.Join(cs, ", ") + ")"
		}
		if reason == allocator.ReasonTaint && len(r.Taints) > 0 {
			part += " (" + taintSummary(r.Taints) + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, " ")
}

// taintExamples is how many tainted devices a summary names per taint.
const taintExamples = 3

// taintSummary counts the tainted devices by the taint that rejected them,
// naming the first few of each: a rule may taint a whole pool, and one
// line per request must stay a line.
func taintSummary(taints map[string]string) string {
	byTaint := map[string][]string{}
	for _, dev := range slices.Sorted(maps.Keys(taints)) {
		byTaint[taints[dev]] = append(byTaint[taints[dev]], dev)
	}
	var parts []string
	for _, taint := range slices.Sorted(maps.Keys(byTaint)) {
		devs := byTaint[taint]
		part := fmt.Sprintf("%s on %s", taint, plural(len(devs), "device"))
		if len(devs) > 1 {
			part = fmt.Sprintf("%s on %s devices", taint, thousands(len(devs)))
		}
		if len(devs) <= taintExamples {
			part += ": " + strings.Join(devs, ", ")
		} else {
			part += ", e.g. " + strings.Join(devs[:taintExamples], ", ")
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
