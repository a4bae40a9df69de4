package simulate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
)

// Removal is a node that could be removed: every claim it held was placed
// on another node.
type Removal struct {
	Node string `json:"node"`
	// Moves are its claims, the claims of one pod together, each with the
	// node they go to.
	Moves []Move `json:"moves"`
}

// Move is a group of claims allocated anew on another node.
type Move struct {
	Claims []string `json:"claims"`
	// To is where the claims end up: a node removed after them moves
	// them on.
	To    string `json:"to"`
	group int
}

// ScaleDown finds nodes of the cluster that could be removed while every
// allocated claim still fits. Nodes are tried holding the fewest claims
// first (then in the cluster's order); a node goes if the claims on its
// pools, the claims of one pod together, can each be allocated on another
// node still there (the first in the cluster's order on which they fit,
// the strategy choosing the devices), with the claims moved before. Claims
// on pools that other nodes see too stay where they are: removing one
// node does not remove such a pool.
func ScaleDown(ctx context.Context, c *Cluster, strategy allocator.Strategy, opts state.Options) ([]Removal, error) {
	if opts.Compiler == nil {
		opts.Compiler = allocator.NewSelectorCompiler()
	}
	st, err := c.newState(opts)
	if err != nil {
		return nil, err
	}
	for _, s := range c.Slices {
		if err := st.SetMixinSlice(s); err != nil {
			return nil, err
		}
	}
	for _, dc := range c.Classes {
		if err := st.SetClass(dc); err != nil {
			return nil, err
		}
	}
	for _, cl := range c.Allocated {
		if err := st.SetClaim(cl); err != nil {
			return nil, fmt.Errorf("ResourceClaim %s/%s: %w", cl.Namespace, cl.Name, err)
		}
	}
	snap := st.Snapshot()
	// owner is the node that alone sees a pool.
	owner := map[pool.ID]int{}
	for i, n := range c.Nodes {
		ids, err := snap.NodePools(n)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		for _, id := range ids {
			if _, seen := owner[id]; seen {
				owner[id] = -1
			} else {
				owner[id] = i
			}
		}
	}
	groups := claimGroups(c.Allocated)
	// where is the node of each group (-1: on shared pools, it stays).
	where := make([]int, len(groups))
	held := make([]int, len(c.Nodes))
	for g, claims := range groups {
		where[g] = nodeOf(claims, owner)
		if where[g] >= 0 {
			held[where[g]]++
		}
	}
	order := make([]int, len(c.Nodes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(held[a], held[b]) })
	removed := make([]bool, len(c.Nodes))
	current := slices.Clone(groups)
	var out []Removal
	for _, ni := range order {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		removed[ni] = true
		rm := Removal{Node: c.Nodes[ni].Name}
		var moved []int
		ok := true
		for g := range groups {
			if where[g] != ni {
				continue
			}
			to, placed, err := placeGroup(ctx, st, c.Nodes, removed, current[g], strategy)
			if err != nil {
				return nil, err
			}
			if to < 0 {
				ok = false
				break
			}
			// If a later group of the node fits nowhere, the node stays
			// and the groups moved so far go back where they were.
			moved = append(moved, g)
			current[g] = placed
			where[g] = to
			rm.Moves = append(rm.Moves, Move{Claims: claimNames(placed), group: g})
		}
		if !ok {
			removed[ni] = false
			for _, g := range moved {
				for _, cl := range groups[g] {
					if err := st.SetClaim(cl); err != nil {
						return nil, err
					}
				}
				current[g], where[g] = groups[g], ni
			}
			continue
		}
		groups = slices.Clone(current)
		out = append(out, rm)
	}
	for _, rm := range out {
		for k := range rm.Moves {
			rm.Moves[k].To = c.Nodes[where[rm.Moves[k].group]].Name
		}
	}
	return out, nil
}

// placeGroup deletes the group's claims and allocates them anew on the
// first node not removed on which they fit together; on none it puts
// them back and returns -1.
func placeGroup(ctx context.Context, st *state.State, nodes []*corev1.Node, removed []bool, claims []*resourcev1.ResourceClaim, strategy allocator.Strategy) (int, []*resourcev1.ResourceClaim, error) {
	pending := make([]*resourcev1.ResourceClaim, len(claims))
	for k, cl := range claims {
		if err := st.DeleteClaim(cl.Namespace, cl.Name); err != nil {
			return -1, nil, err
		}
		cp := *cl
		cp.Status = resourcev1.ResourceClaimStatus{}
		pending[k] = &cp
	}
	for ni, n := range nodes {
		if removed[ni] {
			continue
		}
		res, err := st.Snapshot().Cycle(pending, state.CycleOptions{Strategy: strategy}).Allocate(ctx, n)
		var unfit *allocator.UnfitError
		if errors.As(err, &unfit) {
			continue
		}
		if err != nil {
			return -1, nil, err
		}
		for k, cl := range pending {
			cl.Status.Allocation = res[k]
			cl.Status.ReservedFor = claims[k].Status.ReservedFor
			if err := st.SetClaim(cl); err != nil {
				return -1, nil, err
			}
		}
		return ni, pending, nil
	}
	for _, cl := range claims {
		if err := st.SetClaim(cl); err != nil {
			return -1, nil, err
		}
	}
	return -1, nil, nil
}

// claimGroups groups claims as they must move: those reserved for one pod
// together (and, transitively, for pods sharing a claim).
func claimGroups(claims []*resourcev1.ResourceClaim) [][]*resourcev1.ResourceClaim {
	var groups [][]*resourcev1.ResourceClaim
	byPod := map[string]int{}
	for _, cl := range claims {
		g := -1
		for _, ref := range cl.Status.ReservedFor {
			if k, ok := byPod[string(ref.UID)+"/"+ref.Name]; ok {
				g = k
				break
			}
		}
		if g < 0 {
			g = len(groups)
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], cl)
		for _, ref := range cl.Status.ReservedFor {
			byPod[string(ref.UID)+"/"+ref.Name] = g
		}
	}
	return groups
}

// nodeOf is the node whose own pools hold a group's devices, or -1 if any
// device is on a pool other nodes see (or on none known).
func nodeOf(claims []*resourcev1.ResourceClaim, owner map[pool.ID]int) int {
	node := -1
	for _, cl := range claims {
		for _, r := range cl.Status.Allocation.Devices.Results {
			o, ok := owner[pool.ID{Driver: r.Driver, Pool: r.Pool}]
			if !ok || o < 0 || node >= 0 && o != node {
				return -1
			}
			node = o
		}
	}
	return node
}

func claimNames(claims []*resourcev1.ResourceClaim) []string {
	out := make([]string, len(claims))
	for i, cl := range claims {
		out[i] = cl.Namespace + "/" + cl.Name
	}
	return out
}

// ScaleDownReport is ScaleDown per strategy.
type ScaleDownReport struct {
	Cluster ClusterSummary    `json:"cluster"`
	Claims  int               `json:"claims"`
	Results []ScaleDownResult `json:"results"`
}

// ScaleDownResult is one strategy's removable nodes.
type ScaleDownResult struct {
	Strategy string    `json:"strategy"`
	Removals []Removal `json:"removals"`
}

// WriteJSON writes the report as indented JSON.
func (r *ScaleDownReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText lists, per strategy, the nodes that could go and where their
// claims would go.
func (r *ScaleDownReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster:  %s, %s, %s allocated\n", plural(r.Cluster.Nodes, "node"), plural(r.Cluster.Devices, "device"), plural(r.Claims, "claim"))
	for _, res := range r.Results {
		fmt.Fprintf(&b, "\n%s: %s of %d could be removed\n", res.Strategy, plural(len(res.Removals), "node"), r.Cluster.Nodes)
		for _, rm := range res.Removals {
			if len(rm.Moves) == 0 {
				fmt.Fprintf(&b, "  %s: holds no claim\n", rm.Node)
				continue
			}
			fmt.Fprintf(&b, "  %s:\n", rm.Node)
			for _, mv := range rm.Moves {
				fmt.Fprintf(&b, "    %s -> %s\n", strings.Join(mv.Claims, ", "), mv.To)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
