package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/podclaims"
	"github.com/dractl/dractl/pkg/ops/admit"
	"github.com/dractl/dractl/pkg/ops/live"
)

type explainOptions struct {
	*inputOptions
	cluster *clusterOptions
	node    string
	claim   string
	output  string
}

func newExplainCommand(g *inputOptions) *cobra.Command {
	o := &explainOptions{inputOptions: g}
	cmd := &cobra.Command{
		Use:   "explain (-f FILE|DIR|- ... [--claim NAME] [-o json] | pod/NAME) [--node NAME]",
		Short: "Explain, per node and request, why a ResourceClaim does or does not fit",
		Long: `explain tries the pending claims on each node (or the one named) and
prints, for every request, how many devices were candidates and how many
were rejected for each reason: class or request selector, node, taint,
already allocated, counter <set>/<counter> exhausted, capacity, constraint,
incomplete or invalid pool. Claims are grouped as allocate groups them: the
claims of each Pod (named, made from templates, and the claim
kube-scheduler would create for extended resources that DeviceClasses
back), on the nodes the pod may use, and the pending claims no pod uses. Each group is explained on its
own, against the claims already allocated in the input. --claim picks one
pending claim.

-o json prints one ExplainReport object (schema in docs/output.md); -o
yaml the same as YAML.

explain pod/NAME explains one pod's claims, named and from templates: for
a pending pod, per node, why its pending claims do or do not fit (a node
outside the node selector of an already allocated claim of the pod does
not fit either); for a scheduled pod, which devices its claims hold. It
reads the cluster (kubectl's flags: --kubeconfig, --context, -n, ...), or,
with -f, files such as those dractl snapshot writes. Only DRA is
considered: kube-scheduler's other filters (resources, taints, affinity)
are not.

Exit codes: 0 the explanation was printed; 2 invalid input, a fatal error,
or a cluster that could not be read.`,
		Example: `  dractl explain -f examples/dgx-h100-mixins --claim mig-1g-10gb
  dractl explain -f examples/gpu-partitions -o json
  dractl explain pod/trainer -n ml
  kubectl dra explain pod/trainer --node gpu-node-7`,
		Args:        cobra.MaximumNArgs(1),
		Annotations: map[string]string{namespaceNamesObject: "pod/NAME"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return o.runPod(cmd.Context(), args[0])
			}
			return o.run(cmd.Context())
		},
	}
	o.cluster = addClusterFlags(cmd, live.DefaultTimeout)
	cmd.Flags().StringVar(&o.node, "node", "", "explain for this node only (default: every node of the input)")
	cmd.Flags().StringVar(&o.claim, "claim", "", "name of the pending ResourceClaim to explain (default: all pending claims)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: text)")
	addFeatureGatesFlag(cmd, &o.featureGates)
	return cmd
}

// explainReport is explain's JSON output, a documented and stable
// interface (docs/output.md).
type explainReport struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Groups     []explainGroup `json:"groups"`
	// Problems are the input's errors, when it could not be used.
	Problems []admit.Problem `json:"problems"`
}

type explainGroup struct {
	// Pod is "<namespace>/<name>", empty for claims no pod uses.
	Pod    string        `json:"pod,omitempty"`
	Claims []string      `json:"claims"`
	Nodes  []explainNode `json:"nodes"`
}

type explainNode struct {
	Node string `json:"node"`
	Fits bool   `json:"fits"`
	// Excluded says why the pod may not use the node; nothing was tried.
	Excluded string `json:"excluded,omitempty"`
	// Note says why a node fits without devices.
	Note         string           `json:"note,omitempty"`
	Devices      []explainDevice  `json:"devices,omitempty"`
	InvalidPools []string         `json:"invalidPools,omitempty"`
	Requests     []explainRequest `json:"requests,omitempty"`
	explanation  *allocator.Explanation
}

type explainDevice struct {
	Claim   string `json:"claim"`
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
}

type explainRequest struct {
	Claim            string         `json:"claim"`
	Request          string         `json:"request"`
	Needed           int            `json:"needed"`
	Candidates       int            `json:"candidates"`
	SatisfiableAlone bool           `json:"satisfiableAlone"`
	Rejected         map[string]int `json:"rejected"`
	Counters         map[string]int `json:"counters,omitempty"`
	// Taints: device ("driver/pool/device") to the taint it was rejected
	// for.
	Taints map[string]string `json:"taints,omitempty"`
}

func (o *explainOptions) run(ctx context.Context) error {
	if err := o.requireInputs(); err != nil {
		return err
	}
	if o.output != "" && o.output != "json" && o.output != "yaml" {
		return usageErrorf("--output: expected json or yaml, found %q", o.output)
	}
	report := &explainReport{APIVersion: admit.ReportAPIVersion, Kind: "ExplainReport", Groups: []explainGroup{}, Problems: []admit.Problem{}}
	c, problems, err := o.readCluster(allocator.FirstFit, "explained")
	if err != nil {
		if o.output != "" && problems != nil {
			report.Problems = problems
			if werr := writeReportAs(o.Out, report, o.output); werr != nil {
				return writeError(werr)
			}
		} else {
			printProblems(o.Err, problems)
		}
		return err
	}
	type target struct {
		g      *group
		claims []*resourcev1.ResourceClaim
		// ext: the pod's extended-resource claim, made per node, is
		// explained with its claims.
		ext bool
	}
	var targets []target
	for _, g := range c.groups {
		pending := c.pending(g)
		if o.claim != "" {
			i := slices.IndexFunc(pending, func(cl *resourcev1.ResourceClaim) bool { return cl.Name == o.claim })
			if i < 0 {
				continue
			}
			pending = pending[i : i+1]
		}
		ext := g.ext != nil && o.claim == ""
		if len(pending) > 0 || ext {
			targets = append(targets, target{g, pending, ext})
		}
	}
	if o.claim != "" && len(targets) == 0 {
		return usageErrorf("--claim %s: no pending ResourceClaim of that name in the input", o.claim)
	}
	if len(targets) == 0 {
		if o.output != "" {
			return writeReportOrFail(o.Out, report, o.output)
		}
		fmt.Fprintln(o.Out, "no pending ResourceClaims: every claim in the input is already allocated")
		return nil
	}
	notes := o.Err
	nodes, err := c.nodes(o.node, notes)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	for _, t := range targets {
		eg := explainGroup{Claims: claimNames(t.claims), Nodes: []explainNode{}}
		if t.g.pod != nil {
			eg.Pod = t.g.pod.Namespace + "/" + t.g.pod.Name
		}
		if t.ext {
			eg.Claims = append(eg.Claims, t.g.pod.Namespace+"/"+podclaims.StableExtendedClaimName(t.g.pod))
		}
		for _, node := range nodes {
			en := explainNode{Node: node.Name}
			if why := t.g.excluded(node, c.allocatedOf(t.g)); why != "" {
				en.Excluded = why
				eg.Nodes = append(eg.Nodes, en)
				continue
			}
			claims := t.claims
			if t.ext {
				ext, _, why := t.g.extendedOn(node)
				if why != "" {
					en.Excluded = why
					eg.Nodes = append(eg.Nodes, en)
					continue
				}
				if claims = withExtended(claims, ext); len(claims) == 0 {
					en.Fits, en.Note = true, "the node's device plugins serve the pod's extended resources"
					eg.Nodes = append(eg.Nodes, en)
					continue
				}
			}
			results, err := c.allocate(ctx, node, claims)
			switch {
			case allocator.IsUnfit(err):
				en.explanation = err.(*allocator.UnfitError).Explanation
				en.fill()
			case err != nil:
				return fatal(err)
			default:
				en.Fits = true
				for i, r := range results {
					for _, d := range r.Devices.Results {
						en.Devices = append(en.Devices, explainDevice{claims[i].Namespace + "/" + claims[i].Name, d.Request, d.Driver, d.Pool, d.Device})
					}
				}
			}
			eg.Nodes = append(eg.Nodes, en)
		}
		report.Groups = append(report.Groups, eg)
	}
	if o.output != "" {
		return writeReportOrFail(o.Out, report, o.output)
	}
	for _, eg := range report.Groups {
		if eg.Pod != "" {
			fmt.Fprintf(o.Out, "pod %s (claims %s):\n", eg.Pod, strings.Join(eg.Claims, ", "))
		}
		for _, en := range eg.Nodes {
			switch {
			case en.Excluded != "":
				fmt.Fprintf(o.Out, "node %s: not tried: %s\n", en.Node, en.Excluded)
			case en.Fits && en.Note != "":
				fmt.Fprintf(o.Out, "node %s: fits: %s\n", en.Node, en.Note)
			case en.Fits:
				fmt.Fprintf(o.Out, "node %s: fits\n", en.Node)
				for _, d := range en.Devices {
					fmt.Fprintf(o.Out, "  %s request %s: %s/%s/%s\n", d.Claim, d.Request, d.Driver, d.Pool, d.Device)
				}
			default:
				writeExplanation(o.Out, en.explanation)
			}
		}
	}
	return nil
}

func writeReportOrFail(w io.Writer, v any, output string) error {
	if err := writeReportAs(w, v, output); err != nil {
		return writeError(err)
	}
	return nil
}

func claimNames(claims []*resourcev1.ResourceClaim) []string {
	out := make([]string, len(claims))
	for i, c := range claims {
		out[i] = c.Namespace + "/" + c.Name
	}
	return out
}

// fill copies the allocator's explanation into the JSON form.
func (en *explainNode) fill() {
	e := en.explanation
	for _, ip := range e.InvalidPools {
		en.InvalidPools = append(en.InvalidPools, ip.Error())
	}
	for _, c := range e.Claims {
		for _, r := range c.Requests {
			er := explainRequest{Claim: c.Claim, Request: r.Request, Needed: r.Needed, Candidates: r.Candidates,
				SatisfiableAlone: r.SatisfiableAlone, Rejected: map[string]int{}}
			for reason, n := range r.Rejected {
				er.Rejected[reason.String()] = n
			}
			if len(r.Counters) > 0 {
				er.Counters = r.Counters
			}
			if len(r.Taints) > 0 {
				er.Taints = r.Taints
			}
			en.Requests = append(en.Requests, er)
		}
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
