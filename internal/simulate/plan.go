package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/api"
)

// Template is the shape of a node that capacity planning adds copies of:
// one node and the ResourceSlices of the pools only it sees.
type Template struct {
	Node   *corev1.Node
	Slices []*api.ResourceSlice
	// copies are made once and kept: every run of a search reuses them.
	copies []templateCopy
}

type templateCopy struct {
	node   *corev1.Node
	slices []*api.ResourceSlice
}

// NewTemplate checks that slices are one node's (each names the node in
// spec.nodeName, as a node-local driver publishes them) and makes the
// template. node may be nil: the template node is then named after the
// slices.
func NewTemplate(node *corev1.Node, slices []*api.ResourceSlice) (*Template, error) {
	if len(slices) == 0 {
		return nil, fmt.Errorf("node template: no ResourceSlices")
	}
	name := ""
	if node != nil {
		name = node.Name
	}
	for _, s := range slices {
		n := ptr.Deref(s.Spec.NodeName, "")
		switch {
		case n == "":
			return nil, fmt.Errorf("node template: ResourceSlice %s: spec.nodeName: expected the template node's name (a template is one node's pools), found none", s.Name)
		case name == "":
			name = n
		case n != name:
			return nil, fmt.Errorf("node template: ResourceSlice %s: spec.nodeName: expected %q, found %q (a template is one node)", s.Name, name, n)
		}
	}
	if node == nil {
		node = &corev1.Node{}
		node.Name = name
		node.Labels = map[string]string{corev1.LabelHostname: name}
	}
	return &Template{Node: node, Slices: slices}, nil
}

// copy is the i-th copy of the template (from 1): the node named
// NAME-plan-i, its pools POOL-plan-i.
func (t *Template) copy(i int) templateCopy {
	for len(t.copies) < i {
		k := len(t.copies) + 1
		suffix := fmt.Sprintf("-plan-%d", k)
		node := t.Node.DeepCopy()
		node.Name += suffix
		if _, ok := node.Labels[corev1.LabelHostname]; ok {
			node.Labels[corev1.LabelHostname] = node.Name
		}
		c := templateCopy{node: node}
		for _, s := range t.Slices {
			cp := s.DeepCopy()
			cp.Name += suffix
			cp.Spec.NodeName = ptr.To(node.Name)
			cp.Spec.Pool.Name += suffix
			c.slices = append(c.slices, cp)
		}
		t.copies = append(t.copies, c)
	}
	return t.copies[i-1]
}

// with is base plus n copies of the template, added after base's nodes.
func (t *Template) with(base *Cluster, n int) (*Cluster, error) {
	c := &Cluster{Slices: slices.Clone(base.Slices), Classes: base.Classes, TaintRules: base.TaintRules, Nodes: slices.Clone(base.Nodes), Allocated: base.Allocated}
	names := map[string]bool{}
	for _, node := range base.Nodes {
		names[node.Name] = true
	}
	for i := 1; i <= n; i++ {
		cp := t.copy(i)
		if names[cp.node.Name] {
			return nil, fmt.Errorf("node template: copy %d is named %s, as a node of the cluster", i, cp.node.Name)
		}
		c.Nodes = append(c.Nodes, cp.node)
		c.Slices = append(c.Slices, cp.slices...)
	}
	return c, nil
}

// NeverFit is a group of a workload's pods that fit on no node of the
// cluster with one template node added, empty: however many template
// nodes are added, they are never placed, so a search that counted them
// would only run to its limit.
type NeverFit struct {
	// Group is the Workload mix entry the pods were drawn from, or for a
	// pod read from a file its namespace/name.
	Group string `json:"group"`
	Pods  int    `json:"pods"`
	// Example is the first of the pods, Reason why it fits nowhere, in
	// kube-scheduler's style ("0/1 nodes fit: ...").
	Example string `json:"example"`
	Reason  string `json:"reason"`
}

// SplitNeverFitting takes out of the stream the pods that fit on no node
// of base with one copy of t added, before anything of the stream is
// placed there, and returns the rest and those, by group in order of
// first arrival. Pods whose claims ask for the same thing are tried once,
// alone, as Run would place them; a pod the allocator fails on (an
// invalid pool, a CEL error) is kept, for the runs to report.
func SplitNeverFitting(ctx context.Context, base *Cluster, t *Template, s *Stream, opts Options) (*Stream, []NeverFit, error) {
	c, err := t.with(base, 1)
	if err != nil {
		return nil, nil, err
	}
	if opts.State.Compiler == nil {
		opts.State.Compiler = allocator.NewSelectorCompiler()
	}
	opts.Samples, opts.MaxEvents, opts.Progress, opts.Repacks = 1, 0, nil, 0
	type verdict struct {
		never  bool
		reason string
	}
	verdicts := map[string]verdict{}
	kept := &Stream{Name: s.Name}
	var groups []NeverFit
	at := map[string]int{}
	for i, p := range s.Pods {
		key := p.shape
		if key == "" {
			key = fmt.Sprintf("pod %d", i)
		}
		v, ok := verdicts[key]
		if !ok {
			alone := p
			alone.Arrive, alone.Lifetime = 0, 0
			res, err := Run(ctx, c, &Stream{Name: s.Name, Pods: []Pod{alone}}, opts)
			if err != nil {
				return nil, nil, err
			}
			v.never = res.Placed == 0 && res.Failed == 0
			if v.never && res.FirstFailure != nil {
				v.reason = res.FirstFailure.Summary
			}
			verdicts[key] = v
		}
		if !v.never {
			kept.Pods = append(kept.Pods, p)
			continue
		}
		group := p.Kind
		if group == "" {
			group = p.Name.String()
		}
		j, ok := at[group]
		if !ok {
			j = len(groups)
			at[group] = j
			groups = append(groups, NeverFit{Group: group, Example: p.Name.String(), Reason: v.reason})
		}
		groups[j].Pods++
	}
	return kept, groups, nil
}

// PlanOptions tune a nodes-needed search.
type PlanOptions struct {
	// MaxWait bounds the p99 wait.
	MaxWait time.Duration
	// MaxNodes bounds the template nodes tried. Zero: 4096.
	MaxNodes int
	// Run configures every run; its Strategy is the one planned for.
	Run Options
}

// PlanPoint is one run of a search: the p99 wait with so many template
// nodes.
type PlanPoint struct {
	Nodes   int  `json:"nodes"`
	P99     Wait `json:"p99"`
	Placed  int  `json:"placed"`
	Waiting int  `json:"waiting"`
}

// Plan answers how many template nodes a workload needs.
type Plan struct {
	Strategy string `json:"strategy"`
	// Nodes is the fewest template nodes with which the p99 wait stays
	// within MaxWait; Found is false if MaxNodes were not enough.
	Nodes int  `json:"nodes"`
	Found bool `json:"found"`
	// P99 is the p99 wait with Nodes template nodes; Fewer with one node
	// less (absent when Nodes is 0).
	P99   Wait  `json:"p99"`
	Fewer *Wait `json:"fewer,omitempty"`
	// Curve is every run of the search, by node count.
	Curve []PlanPoint `json:"curve"`
}

// NodesNeeded finds the fewest copies of the template which, added to
// base (possibly empty), keep the stream's p99 wait within MaxWait:
// counts double until one is enough, then a binary search between the
// last count that was not and the first that was. It takes more nodes
// never to make waits longer, which holds for a scheduler that tries the
// same nodes in the same order with room added; the answer is checked
// anyway: with one node fewer the bound was broken.
func NodesNeeded(ctx context.Context, base *Cluster, t *Template, s *Stream, opts PlanOptions) (*Plan, error) {
	if opts.MaxNodes <= 0 {
		opts.MaxNodes = 4096
	}
	if opts.Run.State.Compiler == nil {
		// One compiler for every run: CEL environments are costly.
		opts.Run.State.Compiler = allocator.NewSelectorCompiler()
	}
	plan := &Plan{Strategy: strategyName(opts.Run.Strategy)}
	tried := map[int]PlanPoint{}
	try := func(n int) (bool, error) {
		c, err := t.with(base, n)
		if err != nil {
			return false, err
		}
		p := PlanPoint{Nodes: n}
		if len(c.Nodes) == 0 {
			p.P99, p.Waiting = Wait{Never: true}, len(s.Pods)
		} else {
			res, err := Run(ctx, c, s, opts.Run)
			if err != nil {
				return false, err
			}
			p.P99, p.Placed, p.Waiting = res.Wait.P99, res.Placed, res.Waiting
		}
		tried[n] = p
		plan.Curve = append(plan.Curve, p)
		return within(p.P99, opts.MaxWait), nil
	}
	lo, hi := -1, -1 // lo: the most nodes known too few; hi: the fewest known enough
	for n := 0; ; n = max(1, 2*n) {
		if n > opts.MaxNodes {
			n = opts.MaxNodes
		}
		ok, err := try(n)
		if err != nil {
			return nil, err
		}
		if ok {
			hi = n
			break
		}
		lo = n
		if n == opts.MaxNodes {
			break
		}
	}
	if hi < 0 {
		plan.Nodes, plan.P99 = lo, tried[lo].P99
		sortCurve(plan)
		return plan, nil
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := try(mid)
		if err != nil {
			return nil, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	plan.Nodes, plan.Found, plan.P99 = hi, true, tried[hi].P99
	if lo >= 0 {
		w := tried[lo].P99
		plan.Fewer = &w
	}
	sortCurve(plan)
	return plan, nil
}

func within(w Wait, bound time.Duration) bool {
	return !w.Never && w.Duration() <= bound
}

func sortCurve(p *Plan) {
	slices.SortFunc(p.Curve, func(a, b PlanPoint) int { return a.Nodes - b.Nodes })
}

// PlanReport is a nodes-needed search per strategy.
type PlanReport struct {
	// Template names the template node; Base is the cluster it is added
	// to (no nodes: the template alone).
	Template string         `json:"template"`
	Base     ClusterSummary `json:"base"`
	Workload string         `json:"workload"`
	Pods     int            `json:"pods"`
	// NeverFit are the pods of the workload that no template node can
	// hold (see SplitNeverFitting); Plans size the others, Sized of them.
	NeverFit []NeverFit `json:"neverFit"`
	Sized    int        `json:"sized"`
	// MaxWait bounds the p99 wait, in seconds.
	MaxWait float64 `json:"maxWaitSeconds"`
	Plans   []*Plan `json:"plans"`
}

// WriteJSON writes the report as indented JSON.
func (r *PlanReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteSummary writes one line per strategy, for CI logs.
func (r *PlanReport) WriteSummary(w io.Writer) error {
	var b strings.Builder
	bound := time.Duration(r.MaxWait * float64(time.Second))
	if len(r.NeverFit) > 0 {
		fmt.Fprintf(&b, "%s\n", r.neverFitLine())
	}
	for _, p := range r.Plans {
		if !p.Found {
			fmt.Fprintf(&b, "%s: more than %s %s nodes for p99 wait within %s\n", p.Strategy, thousands(p.Nodes), r.Template, bound)
			continue
		}
		fmt.Fprintf(&b, "%s: %s %s nodes for p99 wait within %s (p99 %s)\n", p.Strategy, thousands(p.Nodes), r.Template, bound, waitString(p.P99))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes the answer per strategy in columns, then every run of
// the searches.
func (r *PlanReport) WriteText(w io.Writer) error {
	var b strings.Builder
	bound := time.Duration(r.MaxWait * float64(time.Second))
	if r.Base.Nodes == 0 {
		fmt.Fprintf(&b, "cluster:  %s nodes alone\n", r.Template)
	} else {
		fmt.Fprintf(&b, "cluster:  %s, %s, %s, %s, and %s nodes\n", plural(r.Base.Nodes, "node"), plural(r.Base.Pools, "pool"),
			plural(r.Base.CounterSets, "counter set"), plural(r.Base.Devices, "device"), r.Template)
	}
	fmt.Fprintf(&b, "workload: %s, %s\n", r.Workload, plural(r.Pods, "pod"))
	if len(r.NeverFit) > 0 {
		fmt.Fprintf(&b, "          %s\n", r.neverFitLine())
		for _, g := range r.NeverFit {
			fmt.Fprintf(&b, "            %s: %s, e.g. %s: %s\n", g.Group, plural(g.Pods, "pod"), g.Example, g.Reason)
		}
	}
	fmt.Fprintf(&b, "bound:    p99 wait within %s\n\n", bound)
	if len(r.Plans) == 0 {
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(label string, cell func(*Plan) string) {
		fmt.Fprint(tw, label)
		for _, p := range r.Plans {
			fmt.Fprint(tw, "\t"+cell(p))
		}
		fmt.Fprintln(tw, "\t")
	}
	row("", func(p *Plan) string { return p.Strategy })
	row(r.Template+" nodes needed", func(p *Plan) string {
		if !p.Found {
			return fmt.Sprintf("more than %s", thousands(p.Nodes))
		}
		return thousands(p.Nodes)
	})
	row("  p99 wait with them", func(p *Plan) string { return waitString(p.P99) })
	row("  p99 wait with one fewer", func(p *Plan) string {
		if p.Fewer == nil {
			return "-"
		}
		return waitString(*p.Fewer)
	})
	row("runs", func(p *Plan) string { return strconv.Itoa(len(p.Curve)) })
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Plans {
		fmt.Fprintf(&b, "\n%s runs:\n", p.Strategy)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "nodes\tp99 wait\tplaced\twaiting at the end\t")
		for _, pt := range p.Curve {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t\n", pt.Nodes, waitString(pt.P99), thousands(pt.Placed), thousands(pt.Waiting))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// neverFitLine counts the pods no template node can hold, by group.
func (r *PlanReport) neverFitLine() string {
	n := 0
	parts := make([]string, len(r.NeverFit))
	for i, g := range r.NeverFit {
		n += g.Pods
		parts[i] = fmt.Sprintf("%s %s", thousands(g.Pods), g.Group)
	}
	rest := fmt.Sprintf("sized for the other %s", thousands(r.Sized))
	if r.Sized == 0 {
		rest = "no pod is left to size"
	}
	return fmt.Sprintf("%s never fit on a %s node (%s); %s", plural(n, "pod"), r.Template, strings.Join(parts, ", "), rest)
}
