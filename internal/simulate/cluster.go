package simulate

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
)

// Cluster is what a simulation starts from.
type Cluster struct {
	Slices  []*api.ResourceSlice
	Classes []*resourcev1.DeviceClass
	// TaintRules taint the devices they select (see state.SetTaintRule).
	TaintRules []*resourcev1.DeviceTaintRule
	// Nodes are tried in this order for every pod.
	Nodes []*corev1.Node
	// Allocated are claims in use when the simulation starts.
	Allocated []*resourcev1.ResourceClaim
}

// island is a set of nodes that share pools, with a State of its own.
// Allocation on a node reads only the pools the node sees (their devices,
// counters and the claims holding them) and the DeviceClasses, so nodes
// that share no pool cannot affect each other: a cluster of 1,000 GPU
// nodes is 1,000 islands, and a placement takes a snapshot of one node's
// pools instead of the whole cluster's. Nodes sharing a pool (a
// multi-host TPU block, network-attached devices) share an island and see
// each other's allocations, exactly as in one State.
type island struct {
	nodes []int // indexes into Cluster.Nodes, in order
	pools []pool.ID
	st    *state.State
	// epoch counts departures: a pod that did not fit on one of the
	// island's nodes may fit only after something there was freed.
	epoch uint32
}

// world is a cluster split into islands.
type world struct {
	c          *Cluster
	islands    []*island
	nodeIsland []int // -1: the node sees no pool
}

// newState is a State with the cluster's DeviceTaintRules.
func (c *Cluster) newState(opts state.Options) (*state.State, error) {
	st := state.New(opts)
	for _, r := range c.TaintRules {
		if err := st.SetTaintRule(r); err != nil {
			return nil, fmt.Errorf("DeviceTaintRule %s: %w", r.Name, err)
		}
	}
	return st, nil
}

func newWorld(c *Cluster, opts state.Options) (*world, error) {
	all, err := c.newState(opts)
	if err != nil {
		return nil, err
	}
	for _, s := range c.Slices {
		if err := all.SetMixinSlice(s); err != nil {
			return nil, err
		}
	}
	snap := all.Snapshot()
	// Union-find over pools: the pools one node sees end up together.
	parent := map[pool.ID]pool.ID{}
	var find func(pool.ID) pool.ID
	find = func(id pool.ID) pool.ID {
		p, ok := parent[id]
		if !ok || p == id {
			parent[id] = id
			return id
		}
		r := find(p)
		parent[id] = r
		return r
	}
	seen := make([][]pool.ID, len(c.Nodes))
	for i, n := range c.Nodes {
		ids, err := snap.NodePools(n)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		seen[i] = ids
		for _, id := range ids[min(1, len(ids)):] {
			a, b := find(ids[0]), find(id)
			if a != b {
				parent[b] = a
			}
		}
	}
	w := &world{c: c, nodeIsland: make([]int, len(c.Nodes))}
	byRoot := map[pool.ID]*island{}
	var poolIsland = map[pool.ID]*island{}
	for i, ids := range seen {
		if len(ids) == 0 {
			w.nodeIsland[i] = -1
			continue
		}
		root := find(ids[0])
		isl := byRoot[root]
		if isl == nil {
			st, err := c.newState(opts)
			if err != nil {
				return nil, err
			}
			isl = &island{st: st}
			byRoot[root] = isl
			w.islands = append(w.islands, isl)
		}
		w.nodeIsland[i] = slices.Index(w.islands, isl)
		isl.nodes = append(isl.nodes, i)
		for _, id := range ids {
			if poolIsland[id] == nil {
				poolIsland[id] = isl
				isl.pools = append(isl.pools, id)
			}
		}
	}
	for _, s := range c.Slices {
		isl := poolIsland[pool.ID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name}]
		if isl == nil {
			continue // no node sees this pool
		}
		if err := isl.st.SetMixinSlice(s); err != nil {
			return nil, err
		}
	}
	for _, isl := range w.islands {
		slices.SortFunc(isl.pools, pool.ID.Compare)
		for _, dc := range c.Classes {
			if err := isl.st.SetClass(dc); err != nil {
				return nil, err
			}
		}
	}
	for _, claim := range c.Allocated {
		// A claim is allocated on one node, so its devices are in one
		// island; it is given to every island it names anyway, so that an
		// odd input is not silently half-counted.
		done := map[*island]bool{}
		for _, r := range claim.Status.Allocation.Devices.Results {
			isl := poolIsland[pool.ID{Driver: r.Driver, Pool: r.Pool}]
			if isl == nil || done[isl] {
				continue
			}
			done[isl] = true
			if err := isl.st.SetClaim(claim); err != nil {
				return nil, fmt.Errorf("ResourceClaim %s/%s: %w", claim.Namespace, claim.Name, err)
			}
		}
	}
	return w, nil
}

// usages calls f with the usage of every pool of every island, now.
func (w *world) usages(f func(*state.PoolUsage)) {
	for _, isl := range w.islands {
		snap := isl.st.Snapshot()
		for _, id := range isl.pools {
			if u := snap.Usage(id); u != nil {
				f(u)
			}
		}
	}
}
