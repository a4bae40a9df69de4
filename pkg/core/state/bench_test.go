package state_test

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/state"
)

// churn returns a 1,000-node cluster and the delta of cycle i: a claim
// allocated on even cycles and released on odd ones.
func churn(b *testing.B) (*state.State, func(i int)) {
	st := cluster(b, 1000)
	c, released := allocatedOn("churn", "node-3", "part-3"), pending("churn")
	at.Must(b, st.SetClaim(released))
	return st, func(i int) {
		x := c
		if i%2 == 1 {
			x = released
		}
		if err := st.SetClaim(x); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDelta is one claim delta and a snapshot on a 1,000-node
// cluster.
func BenchmarkDelta(b *testing.B) {
	st, delta := churn(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		delta(i)
		st.Snapshot()
	}
}

// BenchmarkCycle is a claim delta, a snapshot, a cycle and one node's
// Filter on a 1,000-node cluster.
func BenchmarkCycle(b *testing.B) {
	st, delta := churn(b)
	claims := []*resourcev1.ResourceClaim{pending("p")}
	node := at.Node("node-3")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		delta(i)
		if _, err := st.Snapshot().Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), node); err != nil {
			b.Fatal(err)
		}
	}
}
