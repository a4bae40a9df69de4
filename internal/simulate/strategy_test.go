package simulate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/driver/mig"
)

// TestBestFitOnASaturatedNode pins down what best-fit does on the
// example's stream (one DGX H100, pods arriving about three times as fast
// as the node can hold them, pods that do not fit wait in the queue): it
// packs better, so more pods fit before the first one has to wait; and the
// queue places every pod in the end with either strategy, since pods
// leave. How long pods wait is the overload's doing far more than the
// strategy's (see the README's simulate section for the example's
// numbers).
func TestBestFitOnASaturatedNode(t *testing.T) {
	c := dgxCluster(1)
	var placed, before, slices [2]int
	pods := 0
	for seed := int64(1); seed <= 4; seed++ {
		s := mustStream(t, migWorkload(seed, 300, 20*time.Second, 30*time.Minute))
		pods += len(s.Pods)
		for i, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
			res, err := Run(context.Background(), c, s, Options{Strategy: strategy, State: fixedShareIDs()})
			if err != nil {
				t.Fatal(err)
			}
			placed[i] += res.Placed
			before[i] += res.PlacedBeforeFirstFailure
			if res.Wait.Waited < len(s.Pods)/2 {
				t.Errorf("seed %d %s: %d pods waited; the node is not saturated", seed, res.Strategy, res.Wait.Waited)
			}
			for k, p := range s.Pods {
				if res.placed[k] < 0 {
					continue
				}
				prof, ok := mig.H100.Profile(strings.Replace(p.Kind, "-", ".", 1))
				if !ok {
					t.Fatalf("pod %s: kind %q is no H100 profile", p.Name, p.Kind)
				}
				slices[i] += prof.MemorySlices
			}
		}
	}
	t.Logf("first-fit / best-fit: placed %d / %d, before the first wait %d / %d, memory slices %d / %d",
		placed[0], placed[1], before[0], before[1], slices[0], slices[1])
	if before[1] <= before[0] {
		t.Errorf("best-fit placed %d pods before the first wait, first-fit %d", before[1], before[0])
	}
	if placed[0] != pods || placed[1] != pods {
		t.Errorf("placed %d (first-fit) and %d (best-fit) of %d pods; the queue must place every pod once pods leave", placed[0], placed[1], pods)
	}
}
