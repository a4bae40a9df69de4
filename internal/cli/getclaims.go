package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/dractl/dractl/pkg/ops/live"
)

func newGetClaimsCommand(g *inputOptions) *cobra.Command {
	o := &objectsOptions{inputOptions: g}
	cmd := &cobra.Command{
		Use:     "claims [NAME...]",
		Aliases: []string{"claim", "resourceclaims", "resourceclaim"},
		Short:   "List ResourceClaims with their state, devices, node and pods",
		Long: `get claims lists ResourceClaims, one row each:

  STATE    pending (not allocated), allocated (devices chosen, no pod
           reserved), reserved (for the pods or PodGroup it names),
           prepared (a pod it is reserved for runs: its node's kubelet
           had the driver prepare the devices) or deleting
  DEVICES  the allocated devices, request=pool/device (-o wide: with the
           driver, and every one)
  NODE     where the allocation can be used: the node its node selector
           names, <all>, or <selector>
  PODS     the pods using the claim, reserved first; a pod that waits for
           it is marked (waiting)
  AGE      since the claim was created

Without -f it reads the cluster (kubectl's flags): the claims of the
namespace (-n, or the kubeconfig's; -A every namespace) and its pods. A
namespace whose claims the user may not list is an error that says so
(403), never an empty table; pods the user may not list leave PODS and
the prepared state unknown, with a warning. With -f it reads files, such
as a dractl snapshot directory, and lists every namespace unless -n names
one (a snapshot holds pending pods only, so no claim is prepared there).

-l selects claims by label, NAME arguments by name. -o json and -o yaml
print {"claims": [...]} (docs/output.md). -w prints the list, then a row
again whenever the claim, or a pod using it, changes, until interrupted.

Exit codes: 0 printed; 2 the cluster or the files could not be read
(unreachable, forbidden, invalid input) or the command line is wrong.`,
		Example: `  dractl get claims -A
  dractl get claims -n team-a -l app=train -o wide
  dractl get claims -f /tmp/cluster
  kubectl dra get claims -w`,
		RunE: func(cmd *cobra.Command, args []string) error { return o.runClaims(cmd, args) },
	}
	o.addFlags(cmd, true)
	return cmd
}

// claimRow is one claim as get claims prints it; the JSON names are those
// of -o json and -o yaml (docs/output.md).
type claimRow struct {
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	State     string        `json:"state"`
	Devices   []claimDevice `json:"devices,omitempty"`
	// Node is where the allocation can be used: a node's name, <all> or
	// <selector>.
	Node string `json:"node,omitempty"`
	// ReservedFor are the consumers of status.reservedFor, as
	// resource/name (pods/trainer, podgroups/job).
	ReservedFor []string   `json:"reservedFor,omitempty"`
	Pods        []claimPod `json:"pods,omitempty"`
	// PreparedOn is the node of the running pod that makes the claim
	// prepared.
	PreparedOn string            `json:"preparedOn,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Created    string            `json:"created,omitempty"`

	age string
}

// Claim states.
const (
	claimPending   = "pending"
	claimAllocated = "allocated"
	claimReserved  = "reserved"
	claimPrepared  = "prepared"
	claimDeleting  = "deleting"
	rowDeleted     = "deleted" // a watch's last row of an object gone
)

type claimDevice struct {
	Request     string `json:"request"`
	Driver      string `json:"driver"`
	Pool        string `json:"pool"`
	Device      string `json:"device"`
	AdminAccess bool   `json:"adminAccess,omitempty"`
	ShareID     string `json:"shareID,omitempty"`
}

type claimPod struct {
	Name string `json:"name"`
	// Node and Phase are the pod's; empty when the pod was not read.
	Node     string `json:"node,omitempty"`
	Phase    string `json:"phase,omitempty"`
	Reserved bool   `json:"reserved"`
}

func (r claimRow) key() string { return r.Namespace + "/" + r.Name }

func (o *objectsOptions) runClaims(cmd *cobra.Command, names []string) error {
	sel, err := o.check()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	namespace := ""
	nsGiven := cmd.Flags().Changed("namespace")
	if !o.allNamespaces && (len(o.filenames) == 0 || nsGiven) {
		if namespace, err = o.cluster.namespace(); err != nil {
			return err
		}
	}
	x, c, err := o.load(ctx, false, func(ctx context.Context, c *live.Client) (*objects, error) {
		claims, err := c.Claims(ctx, namespace)
		if err != nil {
			return nil, forbidden(err, live.ResourceClaims, namespace)
		}
		x := &objects{claims: claims}
		x.readPods(ctx, c, namespace)
		return x, nil
	})
	if err != nil {
		return err
	}
	x.printWarnings(o.Err)
	filter := func(rows []claimRow) []claimRow {
		return slices.DeleteFunc(rows, func(r claimRow) bool {
			return namespace != "" && r.Namespace != namespace || len(names) > 0 && !slices.Contains(names, r.Name) ||
				!sel.Matches(labels.Set(r.Labels))
		})
	}
	rows := filter(claimRows(x))
	wide, showNS := o.output == "wide", namespace == ""
	table := func(rows []claimRow, header bool) error { return writeClaimRows(o.Out, rows, showNS, wide, header) }
	if err := showRows(o, "claims", rows, noClaims(namespace), table); err != nil || !o.watch {
		return err
	}
	src, err := newWatchSource(c, namespace, x.podsKnown, false)
	if err != nil {
		return err
	}
	return watch(ctx, src, rows, func(x *objects) []claimRow { return filter(claimRows(x)) },
		func(r claimRow) claimRow { r.State = rowDeleted; return r }, watchPrinter(o, table))
}

func noClaims(namespace string) string {
	if namespace == "" {
		return "No resource claims found."
	}
	return fmt.Sprintf("No resource claims found in namespace %s.", namespace)
}

// claimRows computes the rows, by namespace and name.
func claimRows(x *objects) []claimRow {
	// The pods of each claim, by namespace and claim name, as the
	// kubelet and the scheduler find them (resourceclaim.Name).
	users := map[string][]*corev1.Pod{}
	for _, p := range x.pods {
		for i := range p.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i])
			if err == nil && name != nil {
				k := p.Namespace + "/" + *name
				if !slices.Contains(users[k], p) {
					users[k] = append(users[k], p)
				}
			}
		}
	}
	rows := make([]claimRow, 0, len(x.claims))
	for _, c := range x.claims {
		rows = append(rows, claimRowOf(c, users[c.Namespace+"/"+c.Name], x.podsKnown))
	}
	slices.SortFunc(rows, func(a, b claimRow) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return rows
}

func claimRowOf(c *resourcev1.ResourceClaim, users []*corev1.Pod, podsKnown bool) claimRow {
	r := claimRow{Namespace: c.Namespace, Name: c.Name, Labels: c.Labels, age: age(c.CreationTimestamp)}
	if !c.CreationTimestamp.IsZero() {
		r.Created = c.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
	}
	reserved := map[string]bool{}
	for _, ref := range c.Status.ReservedFor {
		r.ReservedFor = append(r.ReservedFor, ref.Resource+"/"+ref.Name)
		if ref.Resource == "pods" && ref.APIGroup == "" {
			reserved[string(ref.UID)] = true
		}
	}
	found := map[string]bool{}
	for _, p := range users {
		cp := claimPod{Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase), Reserved: reserved[string(p.UID)]}
		found[string(p.UID)] = true
		r.Pods = append(r.Pods, cp)
		if cp.Reserved && p.Status.Phase == corev1.PodRunning && r.PreparedOn == "" {
			r.PreparedOn = p.Spec.NodeName
		}
	}
	// Pods the claim is reserved for that were not read (or not found).
	for _, ref := range c.Status.ReservedFor {
		if ref.Resource == "pods" && ref.APIGroup == "" && !found[string(ref.UID)] {
			r.Pods = append(r.Pods, claimPod{Name: ref.Name, Reserved: true})
		}
	}
	slices.SortFunc(r.Pods, func(a, b claimPod) int {
		if a.Reserved != b.Reserved {
			if a.Reserved {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if a := c.Status.Allocation; a != nil {
		for _, res := range a.Devices.Results {
			d := claimDevice{Request: res.Request, Driver: res.Driver, Pool: res.Pool, Device: res.Device,
				AdminAccess: res.AdminAccess != nil && *res.AdminAccess}
			if res.ShareID != nil {
				d.ShareID = string(*res.ShareID)
			}
			r.Devices = append(r.Devices, d)
		}
		r.Node = allocationNode(a.NodeSelector)
	}
	switch {
	case c.DeletionTimestamp != nil:
		r.State = claimDeleting
	case c.Status.Allocation == nil:
		r.State = claimPending
	case len(c.Status.ReservedFor) == 0:
		r.State = claimAllocated
	case r.PreparedOn != "":
		r.State = claimPrepared
	default:
		r.State = claimReserved
	}
	return r
}

// allocationNode says where an allocation can be used: the one node its
// selector names (by metadata.name, as the scheduler writes it, or by
// hostname), <all> without a selector, <selector> otherwise.
func allocationNode(ns *corev1.NodeSelector) string {
	if ns == nil {
		return "<all>"
	}
	if len(ns.NodeSelectorTerms) == 1 {
		t := ns.NodeSelectorTerms[0]
		one := func(reqs []corev1.NodeSelectorRequirement, key string) (string, bool) {
			if len(reqs) == 1 && reqs[0].Key == key && reqs[0].Operator == corev1.NodeSelectorOpIn && len(reqs[0].Values) == 1 {
				return reqs[0].Values[0], true
			}
			return "", false
		}
		if n, ok := one(t.MatchFields, "metadata.name"); ok && len(t.MatchExpressions) == 0 {
			return n
		}
		if n, ok := one(t.MatchExpressions, corev1.LabelHostname); ok && len(t.MatchFields) == 0 {
			return n
		}
	}
	return "<selector>"
}

func writeClaimRows(w io.Writer, rows []claimRow, showNS, wide, header bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if header {
		h := "NAME\tSTATE\tDEVICES\tNODE\tPODS\tAGE"
		if showNS {
			h = "NAMESPACE\t" + h
		}
		fmt.Fprintln(tw, h)
	}
	for _, r := range rows {
		devices := make([]string, len(r.Devices))
		for i, d := range r.Devices {
			devices[i] = d.Request + "=" + d.Pool + "/" + d.Device
			if wide {
				devices[i] = d.Request + "=" + d.Driver + "/" + d.Pool + "/" + d.Device
			}
		}
		pods := make([]string, len(r.Pods))
		for i, p := range r.Pods {
			pods[i] = p.Name
			if !p.Reserved {
				pods[i] += "(waiting)"
			}
		}
		node := r.Node
		if node == "" {
			node = "-"
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", r.Name, r.State, shorten(devices, wide), node, shorten(pods, wide), r.age)
		if showNS {
			line = r.Namespace + "\t" + line
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
