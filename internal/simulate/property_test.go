package simulate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/state"
)

// TestDeparturesFreeEverything is the departure property: stopped at any
// point, a run with departures leaves the cluster exactly as a fresh State
// given only the surviving claims (with their allocations) would be. Every
// pool's counters, holders and blocked partitions agree, and a claim of
// every shape allocated next gets the same devices on every node in both.
func TestDeparturesFreeEverything(t *testing.T) {
	c := dgxCluster(2)
	r := rand.New(rand.NewPCG(7, 0))
	for seed := range int64(4) {
		s := mustStream(t, migWorkload(seed, 300, 10*time.Second, 15*time.Minute))
		for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
			stop := 50 + r.IntN(400)
			res, err := Run(context.Background(), c, s, Options{Strategy: strategy, MaxEvents: stop, State: fixedShareIDs()})
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("seed %d %s after %d events", seed, res.Strategy, res.Events)
			if res.Departed == 0 {
				t.Fatalf("%s: no departures; the property is not exercised", name)
			}
			sim := res.EndView
			scratch := fromScratch(t, c, survivors(t, name, s, res))
			comparePools(t, name, sim, scratch)
			compareNext(t, name, c, s, sim, scratch, strategy)
		}
	}
}

// survivors are the claims of the pods that were placed and whose
// lifetime has not ended by the last event, with the allocations the run
// gave them. The simulated state must hold exactly these.
func survivors(t *testing.T, name string, s *Stream, res *Result) []*resourcev1.ResourceClaim {
	t.Helper()
	held := map[string]*resourcev1.ResourceClaim{}
	for _, snap := range res.EndView.snaps {
		for _, cl := range snap.Claims() {
			held[cl.Namespace+"/"+cl.Name] = cl
		}
	}
	end := time.Duration(res.End.Time * float64(time.Second))
	var out []*resourcev1.ResourceClaim
	for i, p := range s.Pods {
		if res.placed[i] < 0 || p.Lifetime > 0 && res.placedAt[i]+p.Lifetime <= end {
			continue
		}
		for _, cl := range p.Claims {
			key := cl.Namespace + "/" + cl.Name
			got := held[key]
			if got == nil || got.Status.Allocation == nil {
				t.Fatalf("%s: claim %s of a running pod is not allocated", name, key)
			}
			out = append(out, got)
			delete(held, key)
		}
	}
	for key := range held {
		t.Fatalf("%s: claim %s is still held after its pod left", name, key)
	}
	return out
}

func fromScratch(t *testing.T, c *Cluster, claims []*resourcev1.ResourceClaim) *state.Snapshot {
	t.Helper()
	st := state.New(fixedShareIDs())
	for _, s := range c.Slices {
		coretest.Must(t, st.SetMixinSlice(s))
	}
	for _, dc := range c.Classes {
		coretest.Must(t, st.SetClass(dc))
	}
	for _, cl := range claims {
		coretest.Must(t, st.SetClaim(cl))
	}
	return st.Snapshot()
}

func comparePools(t *testing.T, name string, sim *View, scratch *state.Snapshot) {
	t.Helper()
	for i := range sim.Nodes() {
		for _, got := range sim.NodePools(i) {
			want := scratch.Usage(got.ID)
			for k, cs := range got.CounterSets {
				for j, ctr := range cs.Counters {
					if w := want.CounterSets[k].Counters[j]; ctr.Consumed.Cmp(w.Consumed) != 0 {
						t.Fatalf("%s: %s %s/%s consumed %s, from scratch %s", name, got.ID, cs.Name, ctr.Name, ctr.Consumed.String(), w.Consumed.String())
					}
				}
			}
			for k, d := range got.Devices {
				w := want.Devices[k]
				if holders(d) != holders(w) || d.Blocked != w.Blocked {
					t.Fatalf("%s: %s device %s held by %q blocked %v, from scratch %q blocked %v", name, got.ID, d.Device.Name, holders(d), d.Blocked, holders(w), w.Blocked)
				}
			}
		}
	}
}

func holders(d state.DeviceUsage) string {
	var ks []string
	for _, h := range d.Holders {
		ks = append(ks, h.Claim.String())
	}
	slices.Sort(ks)
	return fmt.Sprint(ks)
}

// compareNext allocates one pod of every shape on every node, on the
// simulated state and on the fresh one.
func compareNext(t *testing.T, name string, c *Cluster, s *Stream, sim *View, scratch *state.Snapshot, strategy allocator.Strategy) {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range s.Pods {
		if seen[p.shape] {
			continue
		}
		seen[p.shape] = true
		probe := make([]*resourcev1.ResourceClaim, len(p.Claims))
		for k, cl := range p.Claims {
			cp := *cl
			cp.Name = "probe-" + cl.Name
			probe[k] = &cp
		}
		for i, node := range c.Nodes {
			got := allocate(sim.snaps[sim.w.nodeIsland[i]], probe, node, strategy)
			want := allocate(scratch, probe, node, strategy)
			if got != want {
				t.Fatalf("%s: %s on node %s: simulated state gives %s, fresh state %s", name, p.Kind, node.Name, got, want)
			}
		}
	}
}

func allocate(snap *state.Snapshot, claims []*resourcev1.ResourceClaim, node *corev1.Node, strategy allocator.Strategy) string {
	res, err := snap.Cycle(claims, state.CycleOptions{Strategy: strategy}).Allocate(context.Background(), node)
	var unfit *allocator.UnfitError
	switch {
	case errors.As(err, &unfit):
		return "does not fit"
	case err != nil:
		return "error " + err.Error()
	}
	var devs []string
	for _, r := range res {
		for _, d := range r.Devices.Results {
			devs = append(devs, d.Pool+"/"+d.Device)
		}
	}
	return fmt.Sprint(devs)
}
