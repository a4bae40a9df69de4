package simulate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/state"
)

// loaded is n DGX H100 nodes with perNode 1g.10gb claims allocated on each.
func loaded(t *testing.T, n, perNode int) *Cluster {
	t.Helper()
	c := dgxCluster(n)
	full := state.New(fixedShareIDs())
	for _, s := range c.Slices {
		coretest.Must(t, full.SetMixinSlice(s))
	}
	for _, dc := range c.Classes {
		coretest.Must(t, full.SetClass(dc))
	}
	tmpl := mustStream(t, migWorkload(1, 50, 1, 0))
	var claim *resourcev1.ResourceClaim
	for _, p := range tmpl.Pods {
		if p.Kind == "1g-10gb" {
			claim = p.Claims[0]
			break
		}
	}
	for ni, node := range c.Nodes {
		for k := range perNode {
			cl := claim.DeepCopy()
			cl.Name = fmt.Sprintf("c-%d-%d", ni, k)
			res, err := full.Snapshot().Cycle([]*resourcev1.ResourceClaim{cl}, state.CycleOptions{}).Allocate(context.Background(), node)
			if err != nil {
				t.Fatal(err)
			}
			cl.Status.Allocation = res[0]
			coretest.Must(t, full.SetClaim(cl))
			c.Allocated = append(c.Allocated, cl)
		}
	}
	return c
}

// TestScaleDown: three nodes a sixth full can lose two, the claims all
// going to the third; three nodes half full can lose one. Each answer is
// checked from scratch: the moved claims, with their new allocations, and
// the claims that stayed fit together on the nodes left, and a further
// node could not go (its claims fit nowhere else).
func TestScaleDown(t *testing.T) {
	for _, tc := range []struct{ perNode, removable int }{{9, 2}, {28, 1}, {50, 0}} {
		c := loaded(t, 3, tc.perNode)
		for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
			rms, err := ScaleDown(context.Background(), c, strategy, fixedShareIDs())
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%d claims a node, %s", tc.perNode, strategyName(strategy))
			if len(rms) != tc.removable {
				t.Fatalf("%s: %d nodes removable, want %d: %+v", name, len(rms), tc.removable, rms)
			}
			gone := map[string]bool{}
			for _, rm := range rms {
				gone[rm.Node] = true
			}
			// Replay: every claim of a removed node moves where the report
			// says, allocated afresh there; all of them must fit.
			st := state.New(fixedShareIDs())
			for _, s := range c.Slices {
				if !gone[*s.Spec.NodeName] {
					coretest.Must(t, st.SetMixinSlice(s))
				}
			}
			for _, dc := range c.Classes {
				coretest.Must(t, st.SetClass(dc))
			}
			to := map[string]string{}
			for _, rm := range rms {
				for _, mv := range rm.Moves {
					if gone[mv.To] {
						t.Fatalf("%s: claims %v move to %s, which is removed too", name, mv.Claims, mv.To)
					}
					for _, cl := range mv.Claims {
						to[cl] = mv.To
					}
				}
			}
			for _, cl := range c.Allocated {
				if _, moves := to[cl.Namespace+"/"+cl.Name]; !moves {
					coretest.Must(t, st.SetClaim(cl))
				}
			}
			for _, cl := range c.Allocated {
				node, moves := to[cl.Namespace+"/"+cl.Name]
				if !moves {
					continue
				}
				var target = c.Nodes[0]
				for _, n := range c.Nodes {
					if n.Name == node {
						target = n
					}
				}
				cp := cl.DeepCopy()
				cp.Status = resourcev1.ResourceClaimStatus{}
				res, err := st.Snapshot().Cycle([]*resourcev1.ResourceClaim{cp}, state.CycleOptions{Strategy: strategy}).Allocate(context.Background(), target)
				var unfit *allocator.UnfitError
				if errors.As(err, &unfit) {
					t.Fatalf("%s: claim %s does not fit on %s", name, cp.Name, node)
				}
				coretest.Must(t, err)
				cp.Status.Allocation = res[0]
				coretest.Must(t, st.SetClaim(cp))
			}
		}
	}
}
