package simulate

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/core/allocator"
)

// TestRepackOfAnOnlineBestFitRun: with nobody leaving, a best-fit run
// placed its pods in arrival order on a cluster that only filled, which is
// exactly what the repack does: it must reach the same placement (every
// running pod placed, the same stranded shares) and let no waiting pod
// in, since each of them found no room on that placement or an emptier
// one.
func TestRepackOfAnOnlineBestFitRun(t *testing.T) {
	c := dgxCluster(2)
	s := mustStream(t, migWorkload(4, 150, time.Second, 0))
	res, err := Run(context.Background(), c, s, Options{Strategy: allocator.BestFit, Samples: 20, Repacks: 5, State: fixedShareIDs()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Repacks) < 4 || res.Waiting == 0 {
		t.Fatalf("%d repacks, %d pods waiting; the test is not exercised", len(res.Repacks), res.Waiting)
	}
	for _, rp := range res.Repacks {
		if rp.Unplaced != 0 || rp.LetIn != 0 || !slices.Equal(rp.Stranded, rp.StrandedNow) {
			t.Errorf("at %.0fs: repack left %d of %d running pods unplaced, let %d of %d waiting in, stranded %v against %v now",
				rp.Time, rp.Unplaced, rp.Running, rp.LetIn, rp.Waiting, rp.Stranded, rp.StrandedNow)
		}
	}
}

// TestRepackFindsRoom: on the example's saturated node, first-fit with
// departures fragments the GPUs, and a repack lets waiting pods in at
// some point of the run; its counts add up.
func TestRepackFindsRoom(t *testing.T) {
	c := dgxCluster(1)
	s := mustStream(t, migWorkload(1, 300, 20*time.Second, 30*time.Minute))
	res, err := Run(context.Background(), c, s, Options{Strategy: allocator.FirstFit, Samples: 40, Repacks: 20, State: fixedShareIDs()})
	if err != nil {
		t.Fatal(err)
	}
	letIn := 0
	for i, rp := range res.Repacks {
		if rp.Running+rp.Waiting == 0 && rp.Time > 0 {
			t.Errorf("repack %d at %.0fs sees no pod", i, rp.Time)
		}
		if rp.LetIn > rp.Waiting || rp.Unplaced > rp.Running {
			t.Errorf("repack %d: let %d of %d waiting in, %d of %d running unplaced", i, rp.LetIn, rp.Waiting, rp.Unplaced, rp.Running)
		}
		letIn += rp.LetIn
	}
	t.Logf("%d repacks let in %d pods in all", len(res.Repacks), letIn)
	if letIn == 0 {
		t.Error("no repack let a waiting pod in on a fragmented, saturated node")
	}
}
