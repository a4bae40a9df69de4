package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/dractl/dractl/internal/simulate"
	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/admit"
)

type simulateOptions struct {
	*inputOptions
	workloads   []string
	strategies  []string
	output      string
	html        string
	samples     int
	maxEvents   int
	reportNodes int
	// Capacity planning.
	repacks      int
	nodeTemplate string
	maxWait      time.Duration
	maxNodes     int
	scaleDown    bool
}

func newSimulateCommand(g *inputOptions) *cobra.Command {
	o := &simulateOptions{inputOptions: g}
	cmd := &cobra.Command{
		Use:   "simulate -f CLUSTER ... --workload FILE ... [--strategy first-fit,best-fit] [-o text|json|html]",
		Short: "Run a stream of pods through a cluster, placement strategies side by side",
		Long: `simulate reads a cluster with -f (ResourceSlices, DeviceClasses, Nodes and
the ResourceClaims already allocated) and a workload with --workload, and
places the workload's pods as kube-scheduler would: nodes in input order,
the first node on which all of a pod's claims can be allocated together
wins, the strategy picks the devices. A pod that fits nowhere waits in the
scheduling queue and is tried again when a pod leaves, in kube-scheduler's
order and with its default backoff (priority, then queueing time; 1s
doubling to 10s; a pod no event moved is retried after 5 minutes).
Scheduling takes no simulated time. After the last arrival the run goes on
until no pod waits or no pod is left to leave.

A workload file holds ResourceClaimTemplates plus
  - a Workload (apiVersion simulate.dractl.dev/v1alpha1): a mix of pod
    kinds with weights (and a priority), a seed, the mean time between
    arrivals and the mean lifetime; pods are generated from it, the same
    seed giving the same stream; and/or
  - Pods (their spec.resourceClaims name templates or pending claims) and
    pending ResourceClaims (each a pod of its own), arriving in input order
    a second apart unless annotated simulate.dractl.dev/arrival, leaving
    after simulate.dractl.dev/lifetime if annotated.

Each strategy runs on its own copy of the cluster. Reported per strategy:
pods placed (on arrival, after waiting), still waiting at the end, the
wait's p50, p95, p99 and longest (a pod never placed waited "never"), the
first pod that had to wait with its explanation, the use of every counter
(summed by family, such as memory-slice) and the stranded share (free, but
consumed by no device that can still be allocated) at that moment and at
the end, and the reasons pods were unschedulable on arrival. At about
--repacks moments an offline repack is measured: every running pod placed
anew, best-fit, in order of arrival, then the waiting pods; the report
shows how many of those it would let in. -o html
writes a self-contained page with charts over time and the occupancy
picture of each node when the first pod had to wait and at the end;
--html FILE writes it besides the -o output. A progress bar goes to
stderr when it is a terminal.

--node-template FILE (one node's ResourceSlices, its Node and DeviceClasses)
answers how many such nodes, added after the cluster's (or alone, without
-f), keep the workload's p99 wait within --max-wait: counts double until
one is enough, then a binary search; each count is a run of the whole
workload. Pods that fit on no node even with one empty template node added
(a profile the template never has, more devices than it holds) are
reported, counted by kind, and the others sized. --scale-down answers which nodes of a cluster snapshot could be
removed, every claim allocated there placed anew on a node that stays.

Exit codes: 0 simulated (pods that do not fit are results, not errors);
2 invalid input or a fatal allocation error.`,
		Example: `  dractl simulate -f examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload
  dractl simulate -f examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload -o html > report.html
  dractl simulate --node-template examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload --max-wait 5m
  dractl snapshot /tmp/cluster
  dractl simulate -f /tmp/cluster --scale-down`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	cmd.Flags().StringArrayVar(&o.workloads, "workload", nil, "file or directory with the workload; repeatable")
	cmd.Flags().StringSliceVar(&o.strategies, "strategy", []string{"first-fit", "best-fit"}, "strategies to compare, comma-separated: first-fit, best-fit")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text, summary (a line per strategy, for CI logs), json or html")
	cmd.Flags().StringVar(&o.html, "html", "", "also write the HTML report to this file")
	cmd.Flags().IntVar(&o.samples, "samples", 200, "about how many points the time series get")
	cmd.Flags().IntVar(&o.maxEvents, "max-events", 0, "stop after this many arrivals and departures (0: the whole workload)")
	cmd.Flags().IntVar(&o.reportNodes, "report-nodes", 16, "nodes drawn in the HTML report at each moment")
	cmd.Flags().IntVar(&o.repacks, "repacks", 10, "about how many times in a run to measure what an offline best-fit repack of the running pods would let in (0: never)")
	cmd.Flags().StringVar(&o.nodeTemplate, "node-template", "", "file or directory with one node's ResourceSlices (and Node, DeviceClasses): find how many such nodes the workload needs")
	cmd.Flags().DurationVar(&o.maxWait, "max-wait", 5*time.Minute, "with --node-template: the bound on the p99 wait")
	cmd.Flags().IntVar(&o.maxNodes, "max-nodes", 4096, "with --node-template: the most template nodes tried")
	cmd.Flags().BoolVar(&o.scaleDown, "scale-down", false, "list the nodes that could be removed with every allocated claim of -f placed elsewhere (no --workload)")
	return cmd
}

func (o *simulateOptions) run(ctx context.Context) error {
	if o.nodeTemplate == "" {
		if err := o.requireInputs(); err != nil {
			return err
		}
	}
	if len(o.workloads) == 0 && !o.scaleDown {
		return usageErrorf("no workload: pass --workload FILE")
	}
	if o.scaleDown && (len(o.workloads) > 0 || o.nodeTemplate != "") {
		return usageErrorf("--scale-down takes the cluster's allocated claims as the workload: no --workload or --node-template")
	}
	switch o.output {
	case "text", "summary", "json", "html":
	default:
		return usageErrorf("--output: expected text, summary, json or html, found %q", o.output)
	}
	if o.samples <= 0 || o.maxEvents < 0 || o.reportNodes <= 0 || o.repacks < 0 {
		return usageErrorf("--samples and --report-nodes must be positive, --max-events and --repacks not negative")
	}
	if o.nodeTemplate != "" && (o.maxWait < 0 || o.maxNodes <= 0) {
		return usageErrorf("--max-wait must not be negative, --max-nodes must be positive")
	}
	var strategies []allocator.Strategy
	for _, s := range o.strategies {
		st, err := parseStrategy(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		strategies = append(strategies, st)
	}
	cl := &simulate.Cluster{}
	var problems []admit.Problem
	if len(o.filenames) > 0 {
		c, problems, err := o.readCluster(allocator.FirstFit, "simulated")
		if err != nil {
			printProblems(o.Err, problems)
			return err
		}
		cl = &simulate.Cluster{Slices: c.set.Slices, Classes: c.set.Classes, TaintRules: c.set.TaintRules, Nodes: c.nodeList}
		pending := 0
		for _, claim := range c.set.Claims {
			if claim.Status.Allocation != nil {
				cl.Allocated = append(cl.Allocated, claim)
			} else {
				pending++
			}
		}
		if pending > 0 && !o.scaleDown {
			fmt.Fprintf(o.Err, "note: %s without status.allocation in the cluster input; the workload is only what --workload gives\n", plural(pending, "ResourceClaim"))
		}
	}
	if o.scaleDown {
		return o.runScaleDown(ctx, cl, strategies)
	}
	var tmpl *simulate.Template
	if o.nodeTemplate != "" {
		var err error
		if tmpl, err = o.readTemplate(cl); err != nil {
			return err
		}
	}
	wl := &inputOptions{Streams: o.Streams, filenames: o.workloads, recursive: o.recursive, maxObjectBytes: o.maxObjectBytes}
	in, err := wl.read()
	if err != nil {
		return err
	}
	problems = nil
	for _, p := range admit.Review(in.objects, in.decodeErrors).Problems {
		if p.Severity == "error" {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		printProblems(o.Err, problems)
		return &exitError{code: ExitCannotAnswer, msg: fmt.Sprintf("%s in the workload; nothing was simulated", plural(len(problems), "error"))}
	}
	stream, err := simulate.NewStream(decode.Group(in.objects))
	var se *simulate.StreamError
	if errors.As(err, &se) {
		for _, line := range se.Lines {
			fmt.Fprintln(o.Err, line)
		}
		return &exitError{code: ExitCannotAnswer, msg: fmt.Sprintf("%s in the workload; nothing was simulated", plural(len(se.Lines), "error"))}
	}
	if err != nil {
		return usageErrorf("%v", err)
	}
	if len(stream.Pods) == 0 {
		return usageErrorf("the workload has no pods: give a Workload, Pods or pending ResourceClaims with --workload")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if tmpl != nil {
		return o.plan(ctx, cl, tmpl, stream, strategies)
	}
	report := &simulate.Report{Cluster: simulate.Summarize(cl), Workload: stream.Name, Pods: len(stream.Pods)}
	for _, st := range strategies {
		opts := simulate.Options{Strategy: st, Samples: o.samples, MaxEvents: o.maxEvents, Repacks: o.repacks}
		bar := newProgressBar(o.Err, strategyLabel(st))
		if bar != nil {
			opts.Progress = bar.update
		}
		res, err := simulate.Run(ctx, cl, stream, opts)
		if bar != nil {
			bar.done()
		}
		if err != nil {
			return &exitError{code: ExitCannotAnswer, msg: err.Error()}
		}
		report.Results = append(report.Results, res)
	}
	htmlOpts := simulate.HTMLOptions{MaxNodes: o.reportNodes}
	if o.html != "" {
		f, err := os.Create(o.html)
		if err != nil {
			return usageErrorf("--html: %v", err)
		}
		err = report.WriteHTML(f, htmlOpts)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return writeError(err)
		}
	}
	switch o.output {
	case "json":
		err = report.WriteJSON(o.Out)
	case "html":
		err = report.WriteHTML(o.Out, htmlOpts)
	case "summary":
		err = report.WriteSummary(o.Out)
	default:
		err = report.WriteText(o.Out)
	}
	if err != nil {
		return writeError(err)
	}
	return nil
}

// readTemplate reads --node-template as a cluster input of its own: one
// node's slices, admitted as -f's are, its Node if given, and DeviceClasses
// the cluster lacks.
func (o *simulateOptions) readTemplate(cl *simulate.Cluster) (*simulate.Template, error) {
	tl := &inputOptions{Streams: o.Streams, filenames: []string{o.nodeTemplate}, recursive: o.recursive, maxObjectBytes: o.maxObjectBytes}
	c, problems, err := tl.readCluster(allocator.FirstFit, "simulated")
	if err != nil {
		printProblems(o.Err, problems)
		return nil, err
	}
	if len(c.set.Nodes) > 1 {
		return nil, usageErrorf("--node-template: expected one Node, found %d", len(c.set.Nodes))
	}
	var node *corev1.Node
	if len(c.set.Nodes) == 1 {
		node = c.set.Nodes[0]
	}
	tmpl, err := simulate.NewTemplate(node, c.set.Slices)
	if err != nil {
		return nil, usageErrorf("--node-template %s: %v", o.nodeTemplate, err)
	}
	have := map[string]bool{}
	for _, dc := range cl.Classes {
		have[dc.Name] = true
	}
	for _, dc := range c.set.Classes {
		if !have[dc.Name] {
			cl.Classes = append(cl.Classes, dc)
		}
	}
	return tmpl, nil
}

// runScaleDown lists, per strategy, the nodes that could go.
func (o *simulateOptions) runScaleDown(ctx context.Context, cl *simulate.Cluster, strategies []allocator.Strategy) error {
	if o.output == "html" || o.output == "summary" {
		return usageErrorf("--scale-down: expected -o text or json, found %s", o.output)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	report := &simulate.ScaleDownReport{Cluster: simulate.Summarize(cl), Claims: len(cl.Allocated)}
	for _, st := range strategies {
		rms, err := simulate.ScaleDown(ctx, cl, st, state.Options{})
		if err != nil {
			return &exitError{code: ExitCannotAnswer, msg: err.Error()}
		}
		report.Results = append(report.Results, simulate.ScaleDownResult{Strategy: strategyLabel(st), Removals: rms})
	}
	var err error
	if o.output == "json" {
		err = report.WriteJSON(o.Out)
	} else {
		err = report.WriteText(o.Out)
	}
	if err != nil {
		return writeError(err)
	}
	return nil
}

// plan finds, per strategy, how many template nodes the workload needs.
func (o *simulateOptions) plan(ctx context.Context, cl *simulate.Cluster, tmpl *simulate.Template, stream *simulate.Stream, strategies []allocator.Strategy) error {
	report := &simulate.PlanReport{Template: tmpl.Node.Name, Base: simulate.Summarize(cl), Workload: stream.Name, Pods: len(stream.Pods), MaxWait: o.maxWait.Seconds()}
	// Pods no template node can hold are reported, not sized: with them
	// every search would run to --max-nodes.
	sized, never, err := simulate.SplitNeverFitting(ctx, cl, tmpl, stream, simulate.Options{Strategy: strategies[0]})
	if err != nil {
		return &exitError{code: ExitCannotAnswer, msg: err.Error()}
	}
	report.NeverFit, report.Sized = never, len(sized.Pods)
	if report.NeverFit == nil {
		report.NeverFit = []simulate.NeverFit{}
	}
	for _, st := range strategies {
		if len(sized.Pods) == 0 {
			break
		}
		plan, err := simulate.NodesNeeded(ctx, cl, tmpl, sized, simulate.PlanOptions{
			MaxWait: o.maxWait, MaxNodes: o.maxNodes,
			Run: simulate.Options{Strategy: st, Samples: o.samples, MaxEvents: o.maxEvents},
		})
		if err != nil {
			return &exitError{code: ExitCannotAnswer, msg: err.Error()}
		}
		report.Plans = append(report.Plans, plan)
	}
	switch o.output {
	case "json":
		err = report.WriteJSON(o.Out)
	case "html":
		err = report.WriteHTML(o.Out)
	case "summary":
		err = report.WriteSummary(o.Out)
	default:
		err = report.WriteText(o.Out)
	}
	if err != nil {
		return writeError(err)
	}
	return nil
}

func strategyLabel(s allocator.Strategy) string {
	if s == allocator.BestFit {
		return "best-fit"
	}
	return "first-fit"
}

// progressBar draws one line on a terminal, redrawn in place.
type progressBar struct {
	w     io.Writer
	label string
	last  int
}

// newProgressBar returns nil unless w is a terminal: a log or a pipe gets
// no progress lines.
func newProgressBar(w io.Writer, label string) *progressBar {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return nil
	}
	return &progressBar{w: w, label: label, last: -1}
}

const progressWidth = 30

func (p *progressBar) update(done, total int) {
	pct := 100
	if total > 0 {
		pct = done * 100 / total
	}
	if pct == p.last {
		return
	}
	p.last = pct
	filled := pct * progressWidth / 100
	fmt.Fprintf(p.w, "\r%-10s [%s%s] %3d%% %s events", p.label, strings.Repeat("#", filled), strings.Repeat(".", progressWidth-filled), pct, thousands(done))
}

func (p *progressBar) done() { fmt.Fprintln(p.w) }
