package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/live"
	"github.com/dractl/dractl/pkg/ops/render"
)

type describeOptions struct {
	*inputOptions
	cluster *clusterOptions
	output  string
}

func newDescribeCommand(g *inputOptions) *cobra.Command {
	o := &describeOptions{inputOptions: g}
	cmd := &cobra.Command{
		Use:   "describe pool|node NAME [-f FILE|DIR|- ...] [-o text|svg]",
		Short: "Show how full a resource pool or a node's pools are, partition by partition",
		Long: `describe reads ResourceSlices, DeviceClasses, Nodes and ResourceClaims and
shows a pool (describe pool NAME, where NAME is a pool name or
DRIVER/POOL) or every pool a node's allocations may use (describe node
NAME). Claims with status.allocation hold their devices.

Every shared counter set is drawn the way KEP-4815 draws a GPU's memory
slices: one column per counter that partitions take whole (a memory slice,
a host's chips) or else per unit of the most used counter, one row per
partition size. A partition shows the claim that holds it, X when an
overlapping partition took what it needs, or its size when it is free.
On a terminal, claims are coloured (NO_COLOR turns this off). -o svg
writes the same picture as SVG.

Without -f, describe reads the cluster (kubectl's flags: --kubeconfig,
--context, ...): for a node, only the ResourceSlices that name it or no
node at all (field selectors), so it stays fast on large clusters.

Exit codes: 0 described; 2 invalid input, no such pool or node, or a
cluster that could not be read.`,
		Example: `  dractl describe pool a100-node -f examples/a100-mig-mixins
  dractl describe node dgx-h100-node -f examples/dgx-h100-mixins -o svg > node.svg`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(o.filenames) == 0 {
				return o.runLive(cmd.Context(), args[0], args[1])
			}
			return o.run(args[0], args[1])
		},
	}
	o.cluster = addClusterFlags(cmd, live.DefaultTimeout)
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or svg")
	return cmd
}

func (o *describeOptions) check(kind string) error {
	if kind != "pool" && kind != "node" {
		return usageErrorf("describe: expected pool or node, found %q", kind)
	}
	if o.output != "text" && o.output != "svg" {
		return usageErrorf("--output: expected text or svg, found %q", o.output)
	}
	return nil
}

// runLive describes a pool or node of the cluster.
func (o *describeOptions) runLive(ctx context.Context, kind, name string) error {
	if err := o.check(kind); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := o.cluster.client()
	if err != nil {
		return err
	}
	var node *corev1.Node
	var slices []*resourcev1.ResourceSlice
	if kind == "node" {
		if node, err = c.Node(ctx, name); err != nil {
			return clusterError(err)
		}
		slices, err = c.NodeSlices(ctx, name)
	} else {
		selector := fields.OneTermEqualSelector("spec.pool.name", name)
		if driver, poolName, ok := strings.Cut(name, "/"); ok {
			selector = fields.AndSelectors(fields.OneTermEqualSelector("spec.driver", driver),
				fields.OneTermEqualSelector("spec.pool.name", poolName))
		}
		slices, err = c.Slices(ctx, selector.String())
	}
	if err != nil {
		return clusterError(err)
	}
	claims, err := c.Claims(ctx, "")
	if err != nil {
		return clusterError(err)
	}
	st, err := (&live.Objects{Slices: slices, Claims: claims}).State()
	if err != nil {
		return clusterError(err)
	}
	return o.write(st.Snapshot(), kind, name, func() *corev1.Node { return node })
}

func (o *describeOptions) run(kind, name string) error {
	if err := o.check(kind); err != nil {
		return err
	}
	if err := o.requireInputs(); err != nil {
		return err
	}
	c, problems, err := o.readCluster(allocator.FirstFit, "described")
	if err != nil {
		printProblems(o.Err, problems)
		return err
	}
	return o.write(c.snap, kind, name, func() *corev1.Node { return c.node(name) })
}

// write describes from a snapshot, whatever its source.
func (o *describeOptions) write(snap *state.Snapshot, kind, name string, node func() *corev1.Node) error {
	var err error
	opts := describeFormat{svg: o.output == "svg", render: render.Options{Color: colorful(o.Out)}}
	if kind == "pool" {
		err = describePool(o.Out, snap, name, opts)
	} else {
		err = describeNode(o.Out, snap, node(), opts)
	}
	if _, ok := err.(*exitError); ok || err == nil {
		return err
	}
	return writeError(err)
}

// describeFormat is how describe writes: text (optionally coloured) or SVG.
type describeFormat struct {
	svg    bool
	render render.Options
}

// describePool writes the pools named name (a pool name, or driver/pool)
// of a snapshot. It does no I/O but writing to w, so any source of
// snapshots can call it.
func describePool(w io.Writer, snap *state.Snapshot, name string, f describeFormat) error {
	var us []*state.PoolUsage
	for _, p := range snap.Pools() {
		if p.ID.Pool == name || p.ID.String() == name {
			us = append(us, snap.Usage(p.ID))
		}
	}
	if len(us) == 0 {
		return usageErrorf("no pool %q: the pools are %s", name, poolNames(snap.Pools()))
	}
	return writePools(w, us, f)
}

// describeNode writes every pool an allocation on node may use.
func describeNode(w io.Writer, snap *state.Snapshot, node *corev1.Node, f describeFormat) error {
	ids, err := snap.NodePools(node)
	if err != nil {
		return &exitError{code: ExitUsage, msg: fmt.Sprintf("node %s: %v", node.Name, err)}
	}
	if len(ids) == 0 {
		return usageErrorf("node %s: no ResourceSlice selects it; the pools are %s", node.Name, poolNames(snap.Pools()))
	}
	us := make([]*state.PoolUsage, len(ids))
	for i, id := range ids {
		us[i] = snap.Usage(id)
	}
	if !f.svg {
		names := make([]string, len(ids))
		for i, id := range ids {
			names[i] = id.String()
		}
		fmt.Fprintf(w, "Node:     %s\nPools:    %s\n\n", node.Name, strings.Join(names, ", "))
	}
	return writePools(w, us, f)
}

func writePools(w io.Writer, us []*state.PoolUsage, f describeFormat) error {
	if f.svg {
		return render.PoolsSVG(w, us, f.render)
	}
	for i, u := range us {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := render.PoolText(w, u, f.render); err != nil {
			return err
		}
	}
	return nil
}

func poolNames(ps []*pool.Pool) string {
	if len(ps) == 0 {
		return "none (no ResourceSlices in the input)"
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.ID.String()
	}
	return strings.Join(names, ", ")
}

// node returns the named Node of the input. A node that is only named by
// slices is still described: kubelet labels every node with its hostname,
// which is all a slice's node selector usually looks at.
func (c *cluster) node(name string) *corev1.Node {
	for _, n := range c.set.Nodes {
		if n.Name == name {
			return n
		}
	}
	return syntheticNode(name)
}

// colorful reports whether w is a terminal that wants colour
// (https://no-color.org).
func colorful(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f) && os.Getenv("NO_COLOR") == ""
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
