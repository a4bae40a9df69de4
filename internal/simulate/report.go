package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dractl/dractl/pkg/core/state"
)

// Report is the strategies of one simulation, side by side.
type Report struct {
	Cluster  ClusterSummary `json:"cluster"`
	Workload string         `json:"workload"`
	Pods     int            `json:"pods"`
	Results  []*Result      `json:"results"`
}

// ClusterSummary counts what the cluster has.
type ClusterSummary struct {
	Nodes       int `json:"nodes"`
	Pools       int `json:"pools"`
	CounterSets int `json:"counterSets"`
	Devices     int `json:"devices"`
}

// Summarize counts the cluster's nodes, pools, counter sets and devices.
func Summarize(c *Cluster) ClusterSummary {
	w, err := newWorld(c, defaultStateOptions())
	s := ClusterSummary{Nodes: len(c.Nodes)}
	if err != nil {
		return s
	}
	w.usages(func(u *state.PoolUsage) {
		s.Pools++
		s.CounterSets += len(u.CounterSets)
		s.Devices += len(u.Devices)
	})
	return s
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the terminal summary: the numbers of every strategy in
// columns, then each first failure with its explanation.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster:  %s, %s, %s, %s\n", plural(r.Cluster.Nodes, "node"), plural(r.Cluster.Pools, "pool"),
		plural(r.Cluster.CounterSets, "counter set"), plural(r.Cluster.Devices, "device"))
	fmt.Fprintf(&b, "workload: %s, %s\n\n", r.Workload, plural(r.Pods, "pod"))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(label string, cell func(*Result) string) {
		fmt.Fprint(tw, label)
		for _, res := range r.Results {
			fmt.Fprint(tw, "\t"+cell(res))
		}
		fmt.Fprintln(tw, "\t")
	}
	row("", func(res *Result) string { return res.Strategy })
	row("pods placed", func(res *Result) string { return thousands(res.Placed) })
	row("  on arrival", func(res *Result) string { return thousands(res.PlacedAtArrival) })
	row("  after waiting", func(res *Result) string { return thousands(res.Placed - res.PlacedAtArrival) })
	row("pods waiting at the end", func(res *Result) string { return thousands(res.Waiting) })
	if slices.ContainsFunc(r.Results, func(res *Result) bool { return res.Failed > 0 }) {
		row("pods failed (allocator error)", func(res *Result) string { return thousands(res.Failed) })
	}
	row("pods running at the end", func(res *Result) string { return thousands(res.Running) })
	row("pods departed", func(res *Result) string { return thousands(res.Departed) })
	row("wait p50 / p95 / p99", func(res *Result) string {
		return waitString(res.Wait.P50) + " / " + waitString(res.Wait.P95) + " / " + waitString(res.Wait.P99)
	})
	row("longest wait", func(res *Result) string { return waitString(res.Wait.Max) })
	if slices.ContainsFunc(r.Results, func(res *Result) bool { return len(res.Repacks) > 0 }) {
		row("repack would let in (most)", func(res *Result) string {
			best := -1
			for i, rp := range res.Repacks {
				if best < 0 || rp.LetIn > res.Repacks[best].LetIn {
					best = i
				}
			}
			if best < 0 {
				return "-"
			}
			rp := res.Repacks[best]
			return fmt.Sprintf("%s of %s waiting at %s", thousands(rp.LetIn), thousands(rp.Waiting), seconds(rp.Time))
		})
	}
	row("placed before first wait", func(res *Result) string { return thousands(res.PlacedBeforeFirstFailure) })
	row("first pod to wait", func(res *Result) string {
		if res.FirstFailure == nil {
			return "none"
		}
		return fmt.Sprintf("arrival %s at %s", thousands(res.FirstFailure.Arrival), seconds(res.FirstFailure.Time))
	})
	row("  reason", func(res *Result) string {
		if res.FirstFailure == nil {
			return "-"
		}
		return res.FirstFailure.Reason
	})
	families := r.families()
	section := func(title string, at func(*Result) *Sample) {
		row(title, func(*Result) string { return "" })
		for _, f := range families {
			row("  "+f, func(res *Result) string {
				s := at(res)
				i := slices.IndexFunc(res.Counters, func(c CounterFamily) bool { return c.Name == f })
				if s == nil || i < 0 {
					return "-"
				}
				return percent(s.Utilisation[i]) + " (" + percent(s.Stranded[i]) + ")"
			})
		}
	}
	section("used (stranded) at first wait", func(res *Result) *Sample { return res.AtFirstFailure })
	section("used (stranded) at the end", func(res *Result) *Sample { return &res.End })
	var reasons []string
	for _, res := range r.Results {
		for _, k := range res.Reasons() {
			if !slices.Contains(reasons, k) {
				reasons = append(reasons, k)
			}
		}
	}
	row("unschedulable on arrival", func(res *Result) string { return thousands(res.Unschedulable) })
	for _, k := range reasons {
		row("  "+k, func(res *Result) string { return thousands(res.UnschedulableByReason[k]) })
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, res := range r.Results {
		f := res.FirstFailure
		if f == nil {
			continue
		}
		kind := ""
		if f.Kind != "" {
			kind = " (" + f.Kind + ")"
		}
		fmt.Fprintf(&b, "\nfirst pod to wait, %s: pod %s%s, arrival %s at %s: %s\n", res.Strategy, f.Pod, kind, thousands(f.Arrival), seconds(f.Time), f.Summary)
		for _, line := range strings.Split(strings.TrimRight(f.Explanation, "\n"), "\n") {
			if line != "" {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// families lists the counter families of every result, in order.
func (r *Report) families() []string {
	var out []string
	for _, res := range r.Results {
		for _, c := range res.Counters {
			if !slices.Contains(out, c.Name) {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

// waitString writes a wait rounded for reading: whole seconds from a
// minute on, milliseconds below.
func waitString(w Wait) string {
	if w.Never {
		return "never"
	}
	d := w.Duration()
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" }

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return thousands(n) + " " + what + "s"
}

// thousands writes n with comma separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// WriteSummary writes one line per strategy, for CI logs: pods placed
// and still waiting, the wait quantiles and the longest wait.
func (r *Report) WriteSummary(w io.Writer) error {
	var b strings.Builder
	for _, res := range r.Results {
		fmt.Fprintf(&b, "%s: placed %s of %s (%s after waiting), waiting %s, wait p50 %s p95 %s p99 %s max %s\n",
			res.Strategy, thousands(res.Placed), thousands(res.Arrived), thousands(res.Placed-res.PlacedAtArrival), thousands(res.Waiting),
			waitString(res.Wait.P50), waitString(res.Wait.P95), waitString(res.Wait.P99), waitString(res.Wait.Max))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
