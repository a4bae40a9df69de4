package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"

	"github.com/spf13/cobra"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/live"
)

type getOptions struct {
	*inputOptions
	cluster *clusterOptions
	output  string
}

func newGetCommand(g *inputOptions) *cobra.Command {
	o := &getOptions{inputOptions: g}
	cmd := &cobra.Command{
		Use:   "get pools [POOL...] [-f FILE|DIR|- ...]",
		Short: "List the resource pools of a cluster with their occupancy",
		Long: `get pools reads the cluster's ResourceSlices and ResourceClaims (kubectl's
flags: --kubeconfig, --context, ...) or, with -f, files such as those
dractl snapshot writes, and prints one row per pool (driver + pool name,
current generation):

  NODE        the node of its slices (a list, "<selector>", "<all>" or
              "<per-device>" for pools not bound to one node)
  SLICES      slices of the current generation published / resourceSliceCount
  DEVICES     devices in use by allocated claims / devices published
  COUNTERS    the shared counter most consumed, summed over the pool's
              counter sets: consumed / capacity (percent); -o wide lists all
  STATE       ok, incomplete (the scheduler skips the pool) or invalid (a
              rule spanning its slices is broken: the first problem follows)

With POOL arguments only the pools of those names are printed.

-o json and -o yaml print the same as a list of objects.

Exit codes: 0 printed; 2 the cluster could not be read (unreachable,
forbidden, bad kubeconfig), invalid input, or the command line is wrong.`,
		Example: `  dractl get pools
  dractl get pools -o wide --context prod
  dractl get pools -f /tmp/cluster
  kubectl dra get pools dgx-h100-node`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || (args[0] != "pools" && args[0] != "pool") {
				return usageErrorf("get: expected pools [POOL...], claims [NAME...] or devices [POOL...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), args[1:]) },
	}
	o.cluster = addClusterFlags(cmd, live.DefaultTimeout)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: wide, json or yaml (default: a table)")
	cmd.AddCommand(newGetClaimsCommand(g), newGetDevicesCommand(g))
	return cmd
}

func (o *getOptions) run(ctx context.Context, names []string) error {
	switch o.output {
	case "", "wide", "json", "yaml":
	default:
		return usageErrorf("--output: expected wide, json or yaml, found %q", o.output)
	}
	if len(o.filenames) > 0 {
		// Files are read as every offline verb reads them.
		c, problems, err := o.readCluster(allocator.FirstFit, "listed")
		if err != nil {
			printProblems(o.Err, problems)
			return err
		}
		return o.write(c.snap, names)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := o.cluster.client()
	if err != nil {
		return err
	}
	// Claims are listed while the slices are; pool rows never read device
	// attributes.
	var claims []*resourcev1.ResourceClaim
	var claimsErr error
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		claims, claimsErr = c.Claims(ctx, "")
	}()
	slices, err := c.SlicesWith(ctx, "", live.PoolFields)
	<-listed
	if err != nil {
		return clusterError(err)
	}
	if claimsErr != nil {
		return clusterError(claimsErr)
	}
	st := state.New(state.Options{})
	for _, s := range slices {
		if err := st.SetSlice(s); err != nil {
			return clusterError(err)
		}
	}
	for _, cl := range claims {
		if err := st.SetClaim(cl); err != nil {
			return clusterError(fmt.Errorf("ResourceClaim %s/%s: %w", cl.Namespace, cl.Name, err))
		}
	}
	return o.write(st.Snapshot(), names)
}

// write prints the rows of a snapshot, whatever its source.
func (o *getOptions) write(snap *state.Snapshot, names []string) error {
	if err := writePoolRows(o.Out, poolRows(snap, names), o.output); err != nil {
		return writeError(err)
	}
	return nil
}

// poolRow is one pool as get pools prints it; the JSON names are those of
// -o json and -o yaml.
type poolRow struct {
	Driver     string          `json:"driver"`
	Pool       string          `json:"pool"`
	Nodes      []string        `json:"nodes"`
	Generation int64           `json:"generation"`
	Slices     int             `json:"slices"`
	SliceCount int64           `json:"resourceSliceCount"`
	Devices    int             `json:"devices"`
	Allocated  int             `json:"allocated"`
	Counters   []counterRow    `json:"counters,omitempty"`
	State      state.Condition `json:"state"`
	Reason     string          `json:"reason,omitempty"`
}

// counterRow is one counter name summed over the pool's counter sets.
type counterRow struct {
	Name     string            `json:"name"`
	Consumed resource.Quantity `json:"consumed"`
	Capacity resource.Quantity `json:"capacity"`
}

func (c counterRow) percent() int64 {
	capacity := c.Capacity.AsApproximateFloat64()
	if capacity <= 0 {
		return 0
	}
	return int64(100*c.Consumed.AsApproximateFloat64()/capacity + 0.5)
}

func (c counterRow) String() string {
	return fmt.Sprintf("%s %s/%s (%d%%)", c.Name, c.Consumed.String(), c.Capacity.String(), c.percent())
}

// poolRows computes the rows on every core: a pool's usage (validation,
// counters) is independent of the others'.
func poolRows(snap *state.Snapshot, names []string) []poolRow {
	var pools []*pool.Pool
	for _, p := range snap.Pools() {
		if len(names) == 0 || slices.Contains(names, p.ID.Pool) {
			pools = append(pools, p)
		}
	}
	if len(pools) == 0 {
		return nil
	}
	rows := make([]poolRow, len(pools))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pools)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(pools); i = int(next.Add(1) - 1) {
				rows[i] = newPoolRow(snap.Usage(pools[i].ID))
			}
		})
	}
	wg.Wait()
	return rows
}

func newPoolRow(u *state.PoolUsage) poolRow {
	r := poolRow{
		Driver: u.Driver, Pool: u.ID.Pool, Nodes: poolNodes(u.Pool),
		Generation: u.Generation, Slices: len(u.Slices), SliceCount: u.SliceCount,
		Devices: len(u.Devices), Allocated: u.Allocated(),
	}
	r.State, r.Reason = u.Condition()
	byName := map[string]int{}
	for _, cs := range u.CounterSets {
		for _, c := range cs.Counters {
			i, ok := byName[c.Name]
			if !ok {
				i = len(r.Counters)
				byName[c.Name] = i
				r.Counters = append(r.Counters, counterRow{Name: c.Name})
			}
			r.Counters[i].Consumed.Add(c.Consumed)
			r.Counters[i].Capacity.Add(c.Capacity)
		}
	}
	slices.SortFunc(r.Counters, func(a, b counterRow) int { return strings.Compare(a.Name, b.Name) })
	return r
}

// poolNodes says where a pool's devices are: the nodes its slices name,
// or how slices without a node name select nodes.
func poolNodes(p *pool.Pool) []string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range p.Slices {
		switch {
		case s.Spec.NodeName != nil && *s.Spec.NodeName != "":
			add(*s.Spec.NodeName)
		case s.Spec.NodeSelector != nil:
			add("<selector>")
		case s.Spec.AllNodes != nil && *s.Spec.AllNodes:
			add("<all>")
		case s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection:
			add("<per-device>")
		}
	}
	slices.Sort(out)
	return out
}

// busiest is the counter with the highest share consumed (the first by
// name among equals): the one that runs out first.
func busiest(cs []counterRow) string {
	if len(cs) == 0 {
		return "-"
	}
	best := 0
	for i := range cs {
		if cs[i].percent() > cs[best].percent() {
			best = i
		}
	}
	return cs[best].String()
}

func writePoolRows(w io.Writer, rows []poolRow, output string) error {
	switch output {
	case "json", "yaml":
		return writeList(w, "pools", rows, output)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No resource pools found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "DRIVER\tPOOL\tNODE\tSLICES\tGENERATION\tDEVICES\tCOUNTERS\tSTATE")
	for _, r := range rows {
		counters := busiest(r.Counters)
		if output == "wide" && len(r.Counters) > 0 {
			parts := make([]string, len(r.Counters))
			for i, c := range r.Counters {
				parts[i] = c.String()
			}
			counters = strings.Join(parts, ", ")
		}
		stateCol := string(r.State)
		if r.Reason != "" {
			stateCol += ": " + r.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%d/%d\t%s\t%s\n", r.Driver, r.Pool, nodesColumn(r.Nodes, output == "wide"),
			r.Slices, r.SliceCount, r.Generation, r.Allocated, r.Devices, counters, stateCol)
	}
	return tw.Flush()
}

// nodesColumn shortens a long node list to its first two and a count,
// unless wide.
func nodesColumn(nodes []string, wide bool) string {
	if len(nodes) == 0 {
		return "-"
	}
	if wide || len(nodes) <= 2 {
		return strings.Join(nodes, ",")
	}
	return fmt.Sprintf("%s,+%d", strings.Join(nodes[:2], ","), len(nodes)-2)
}
