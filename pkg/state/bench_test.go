package state_test

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	at "github.com/dractl/dractl/pkg/allocator/allocatortest"
	"github.com/dractl/dractl/pkg/state"
)

// BenchmarkDelta is one claim delta (allocated, then released) and a
// snapshot on a 1,000-node cluster.
func BenchmarkDelta(b *testing.B) {
	st := cluster(b, 1000)
	c, released := allocatedOn("churn", "node-3", "part-3"), pending("churn")
	must(b, st.SetClaim(released))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		x := c
		if i%2 == 1 {
			x = released
		}
		if err := st.SetClaim(x); err != nil {
			b.Fatal(err)
		}
		st.Snapshot()
	}
}

// BenchmarkCycle is a delta, a snapshot, a cycle and one node's Filter on
// a 1,000-node cluster.
func BenchmarkCycle(b *testing.B) {
	st := cluster(b, 1000)
	c, released := allocatedOn("churn", "node-3", "part-3"), pending("churn")
	must(b, st.SetClaim(released))
	claims := []*resourcev1.ResourceClaim{pending("p")}
	node := at.Node("node-3")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		x := c
		if i%2 == 1 {
			x = released
		}
		if err := st.SetClaim(x); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Snapshot().Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), node); err != nil {
			b.Fatal(err)
		}
	}
}
