package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/ops/live"
)

func newGetDevicesCommand(g *inputOptions) *cobra.Command {
	o := &objectsOptions{inputOptions: g}
	cmd := &cobra.Command{
		Use:     "devices [POOL...]",
		Aliases: []string{"device"},
		Short:   "List every device of the resource pools with the claim that holds it, taints and health",
		Long: `get devices lists every device of each pool's current generation, one row
each:

  NODE     the node of its slice (or <selector>, <all> for devices not
           bound to one node)
  STATE    allocated (a claim's allocation names it), blocked (free, but
           an allocated partition took counters it needs, so it cannot be
           made now) or free
  CLAIM    the claims that hold it, namespace/name; for a blocked device,
           the claims holding the partitions in its way (counters: ...)
  TAINTS   its taints, key=value:Effect, a DeviceTaintRule's included
  HEALTH   unhealthy when its driver taints it dractl.dev/unhealthy or a
           pod using it reports it unhealthy (the kubelet's
           allocatedResourcesStatus, KEP-4680), healthy when such a pod
           reports it healthy, - when nothing says

With POOL arguments only the pools of those names are listed. Without -f
it reads the cluster's ResourceSlices, ResourceClaims, DeviceTaintRules
and pods; with -f it reads files, such as a dractl snapshot directory.
-o wide adds the driver and lists every claim; -o json and -o yaml print
{"devices": [...]} (docs/output.md). -w prints the list, then a row again
whenever the device, a claim or a pod changes it, until interrupted.

Exit codes: 0 printed; 2 the cluster or the files could not be read
(unreachable, forbidden, invalid input) or the command line is wrong.`,
		Example: `  dractl get devices
  dractl get devices gpu-node-1 -o wide
  dractl get devices -f /tmp/cluster -o json`,
		RunE: func(cmd *cobra.Command, args []string) error { return o.runDevices(cmd, args) },
	}
	o.addFlags(cmd, false)
	return cmd
}

// deviceRow is one device as get devices prints it; the JSON names are
// those of -o json and -o yaml (docs/output.md).
type deviceRow struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
	Node   string `json:"node"`
	State  string `json:"state"`
	// Claims hold the device, namespace/name.
	Claims []string `json:"claims,omitempty"`
	// BlockedBy are the claims holding devices that took counters this
	// one needs.
	BlockedBy []string `json:"blockedBy,omitempty"`
	Taints    []string `json:"taints,omitempty"`
	Health    string   `json:"health"`
}

// Device states and health.
const (
	deviceFree      = "free"
	deviceAllocated = "allocated"
	deviceBlocked   = "blocked"

	healthUnknown   = "-"
	healthHealthy   = "healthy"
	healthUnhealthy = "unhealthy"
)

func (r deviceRow) key() string { return r.Driver + "/" + r.Pool + "/" + r.Device }

func (o *objectsOptions) runDevices(cmd *cobra.Command, pools []string) error {
	if _, err := o.check(); err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	x, c, err := o.load(ctx, true, readDevicesLive)
	if err != nil {
		return err
	}
	x.printWarnings(o.Err)
	wide := o.output == "wide"
	rows := deviceRows(x, pools)
	table := func(rows []deviceRow, header bool) error { return writeDeviceRows(o.Out, rows, wide, header) }
	if err := showRows(o, "devices", rows, "No devices found.", table); err != nil || !o.watch {
		return err
	}
	src, err := newWatchSource(c, "", x.podsKnown, true)
	if err != nil {
		return err
	}
	return watch(ctx, src, rows, func(x *objects) []deviceRow { return deviceRows(x, pools) },
		func(r deviceRow) deviceRow { r.State = rowDeleted; return r }, watchPrinter(o, table))
}

// readDevicesLive reads what every device's row needs: all slices, claims
// and taint rules (errors), and pods for health (a warning when refused).
func readDevicesLive(ctx context.Context, c *live.Client) (*objects, error) {
	slices, err := c.Slices(ctx, "")
	if err != nil {
		return nil, forbidden(err, live.ResourceSlices, "")
	}
	claims, err := c.Claims(ctx, "")
	if err != nil {
		return nil, forbidden(err, live.ResourceClaims, "")
	}
	rules, err := c.TaintRules(ctx)
	if err != nil {
		return nil, forbidden(err, live.DeviceTaintRules, "")
	}
	st := state.New(state.Options{})
	for _, r := range rules {
		if err := st.SetTaintRule(r); err != nil {
			return nil, clusterError(fmt.Errorf("DeviceTaintRule %s: %w", r.Name, err))
		}
	}
	for _, s := range slices {
		if err := st.SetSlice(s); err != nil {
			return nil, clusterError(err)
		}
	}
	x := &objects{claims: claims}
	x.readPods(ctx, c, "")
	return x, x.state(st)
}

// deviceRows lists the devices of the snapshot's pools (those named, or
// all), pool by pool in the pools' order, devices in their slices' order.
func deviceRows(x *objects, names []string) []deviceRow {
	health := reportedHealth(x)
	var rows []deviceRow
	for _, p := range x.snap.Pools() {
		if len(names) > 0 && !slices.Contains(names, p.ID.Pool) {
			continue
		}
		u := x.snap.Usage(p.ID)
		if u == nil {
			continue
		}
		for i := range u.Devices {
			du := &u.Devices[i]
			r := deviceRow{Driver: p.ID.Driver, Pool: p.ID.Pool, Device: du.Device.Name, Node: deviceNode(du), State: deviceFree, Health: healthUnknown}
			for _, h := range du.Holders {
				r.Claims = append(r.Claims, h.Claim.Namespace+"/"+h.Claim.Name)
			}
			switch {
			case len(du.Holders) > 0:
				r.State = deviceAllocated
			case du.Blocked:
				r.State, r.BlockedBy = deviceBlocked, blockers(u, i)
			}
			for _, t := range du.Device.Taints {
				r.Taints = append(r.Taints, taintText(t))
				if t.Key == driverkit.TaintKeyUnhealthy {
					r.Health = healthUnhealthy
				}
			}
			if h, ok := health[deviceID{p.ID.Driver, p.ID.Pool, du.Device.Name}]; ok && r.Health != healthUnhealthy {
				r.Health = h
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// deviceNode is where a device can be used, from its slice (or, with
// perDeviceNodeSelection, from the device).
func deviceNode(du *state.DeviceUsage) string {
	s, d := du.Slice.Spec, du.Device
	switch {
	case d.NodeName != nil && *d.NodeName != "":
		return *d.NodeName
	case d.AllNodes != nil && *d.AllNodes:
		return "<all>"
	case d.NodeSelector != nil:
		return "<selector>"
	case s.NodeName != nil && *s.NodeName != "":
		return *s.NodeName
	case s.AllNodes != nil && *s.AllNodes:
		return "<all>"
	}
	return "<selector>"
}

// blockers are the claims holding the in-use devices that consume a
// counter the blocked device i needs, sorted.
func blockers(u *state.PoolUsage, i int) []string {
	needs := map[[2]string]bool{}
	for _, cv := range u.Devices[i].View.Consumptions {
		for name := range cv.Counters() {
			needs[[2]string{cv.CounterSet(), name}] = true
		}
	}
	var out []string
	for j := range u.Devices {
		d := &u.Devices[j]
		if j == i || !d.InUse() || d.ViewErr != nil {
			continue
		}
		takes := false
		for _, cv := range d.View.Consumptions {
			for name := range cv.Counters() {
				takes = takes || needs[[2]string{cv.CounterSet(), name}]
			}
		}
		if !takes {
			continue
		}
		for _, h := range d.Holders {
			if k := h.Claim.Namespace + "/" + h.Claim.Name; !h.AdminAccess && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// taintText writes a taint as kubectl writes a node's.
func taintText(t api.DeviceTaint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

type deviceID struct{ driver, pool, device string }

// reportedHealth is the health pods report of the devices they use: the
// kubelet writes it per container and claim (or claim/request) into
// status.containerStatuses[].allocatedResourcesStatus (KEP-4680), and the
// claim's allocation says which devices serve that request. A device with
// several reports takes the worst.
func reportedHealth(x *objects) map[deviceID]string {
	claims := map[string]*resourcev1.ResourceClaim{}
	for _, c := range x.claims {
		claims[c.Namespace+"/"+c.Name] = c
	}
	rank := map[string]int{healthHealthy: 1, healthUnknown: 2, healthUnhealthy: 3}
	out := map[deviceID]string{}
	for _, p := range x.pods {
		for _, cs := range append(slices.Clip(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			for _, rs := range cs.AllocatedResourcesStatus {
				entry, request, _ := strings.Cut(strings.TrimPrefix(string(rs.Name), "claim:"), "/")
				c := podClaim(p, entry, claims)
				if c == nil || c.Status.Allocation == nil || len(rs.Resources) == 0 {
					continue
				}
				worst := healthHealthy
				for _, h := range rs.Resources {
					v := healthUnknown
					switch h.Health {
					case corev1.ResourceHealthStatusHealthy:
						v = healthHealthy
					case corev1.ResourceHealthStatusUnhealthy:
						v = healthUnhealthy
					}
					if rank[v] > rank[worst] {
						worst = v
					}
				}
				for _, res := range c.Status.Allocation.Devices.Results {
					if request != "" && resourceclaim.BaseRequestRef(res.Request) != request && res.Request != request {
						continue
					}
					id := deviceID{res.Driver, res.Pool, res.Device}
					if rank[worst] > rank[out[id]] {
						out[id] = worst
					}
				}
			}
		}
	}
	return out
}

// podClaim is the claim a pod's resourceClaims entry names.
func podClaim(p *corev1.Pod, entry string, claims map[string]*resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	for i := range p.Spec.ResourceClaims {
		if p.Spec.ResourceClaims[i].Name != entry {
			continue
		}
		name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			return nil
		}
		return claims[p.Namespace+"/"+*name]
	}
	return nil
}

func writeDeviceRows(w io.Writer, rows []deviceRow, wide, header bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if header {
		h := "POOL\tDEVICE\tNODE\tSTATE\tCLAIM\tTAINTS\tHEALTH"
		if wide {
			h = "DRIVER\t" + h
		}
		fmt.Fprintln(tw, h)
	}
	for _, r := range rows {
		claim := shorten(r.Claims, wide)
		if len(r.BlockedBy) > 0 {
			claim = "counters: " + shorten(r.BlockedBy, wide)
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Pool, r.Device, r.Node, r.State, claim, shorten(r.Taints, true), r.Health)
		if wide {
			line = r.Driver + "\t" + line
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
