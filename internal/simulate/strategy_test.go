package simulate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/mig"
)

// TestBestFitOnASaturatedNode pins down what best-fit does on the
// example's stream (one DGX H100, pods arriving twice as fast as the node
// can hold them, a pod that fits nowhere fails): it packs better, so more
// pods fit before the first failure; because it keeps whole and half GPUs
// free it admits more of the large profiles later on; and because it
// strands less, it places at least as many memory slices over the run.
// Pod count on a saturated cluster measures the mix that got in, not how
// well it was packed: best-fit spends its slices on larger pods, so it may
// place fewer pods in all on one stream (the example's does).
func TestBestFitOnASaturatedNode(t *testing.T) {
	c := dgxCluster(1)
	var placed, before, large, slices [2]int
	for seed := int64(1); seed <= 4; seed++ {
		s := mustStream(t, migWorkload(seed, 300, 20*time.Second, 30*time.Minute))
		for i, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
			res, err := Run(context.Background(), c, s, Options{Strategy: strategy, State: fixedShareIDs()})
			if err != nil {
				t.Fatal(err)
			}
			placed[i] += res.Placed
			before[i] += res.PlacedBeforeFirstFailure
			for k, p := range s.Pods {
				if res.placed[k] < 0 {
					continue
				}
				prof, ok := mig.H100.Profile(strings.Replace(p.Kind, "-", ".", 1))
				if !ok {
					t.Fatalf("pod %s: kind %q is no H100 profile", p.Name, p.Kind)
				}
				slices[i] += prof.MemorySlices
				if prof.MemorySlices >= 4 {
					large[i]++
				}
			}
		}
	}
	t.Logf("first-fit / best-fit: placed %d / %d, before the first failure %d / %d, large %d / %d, memory slices %d / %d",
		placed[0], placed[1], before[0], before[1], large[0], large[1], slices[0], slices[1])
	if before[1] <= before[0] {
		t.Errorf("best-fit placed %d pods before the first failure, first-fit %d", before[1], before[0])
	}
	if large[1] <= large[0] {
		t.Errorf("best-fit admitted %d large pods, first-fit %d", large[1], large[0])
	}
	if slices[1] < slices[0] {
		t.Errorf("memory slices placed: best-fit %d, first-fit %d", slices[1], slices[0])
	}
}
