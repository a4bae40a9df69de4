package allocator_test

import (
	"testing"

	"github.com/dractl/dractl/internal/testing/packing"
)

// TestBestFitPacksMIGStream is the fragmentation claim of best-fit: on
// random streams of MIG claims against a DGX H100, it places more claims
// than first-fit before the first failure, summed over the streams. A
// greedy online choice cannot win on every stream (it cannot know the
// next claim), so single streams are only counted; the sum is the claim.
func TestBestFitPacksMIGStream(t *testing.T) {
	p, err := packing.ComparePacking(24, 60)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("total over %d streams: first-fit %d, best-fit %d claims before the first failure (best-fit wins %d, ties %d, loses %d)",
		p.Streams, p.FirstFit, p.BestFit, p.Wins, p.Ties, p.Losses)
	// Offline, knowing each whole stream, at most 619 claims fit before a
	// failure (exhaustive search over per-GPU configurations), against 593
	// for first-fit: best-fit is asked to reach 99 % of that optimum (it
	// places 614), which is also more than 1 % above first-fit.
	const optimum = 619
	if 100*p.BestFit < 99*optimum {
		t.Errorf("best-fit placed %d claims in total: want at least 99 %% of the offline optimum %d", p.BestFit, optimum)
	}
	if 100*p.BestFit < 101*p.FirstFit {
		t.Errorf("best-fit placed %d claims in total, first-fit %d: best-fit should pack at least 1 %% more", p.BestFit, p.FirstFit)
	}
}
