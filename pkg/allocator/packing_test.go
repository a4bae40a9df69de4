package allocator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/internal/examplegen"
	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/pool"
)

// migStream is a seeded stream of single-request MIG claims, small
// profiles more often than large ones, as on a shared inference cluster.
func migStream(seed uint64, n int) []*resourcev1.ResourceClaim {
	profiles := []struct {
		name   string
		weight int
	}{{"1g.10gb", 6}, {"1g.20gb", 3}, {"2g.20gb", 3}, {"3g.40gb", 2}, {"4g.40gb", 1}, {"7g.80gb", 1}}
	total := 0
	for _, p := range profiles {
		total += p.weight
	}
	r := rand.New(rand.NewPCG(seed, 0))
	out := make([]*resourcev1.ResourceClaim, n)
	for i := range out {
		pick := r.IntN(total)
		name := profiles[len(profiles)-1].name
		for _, p := range profiles {
			if pick < p.weight {
				name = p.name
				break
			}
			pick -= p.weight
		}
		out[i] = &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%03d", i), Namespace: "default"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "mig",
				Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: "mig.nvidia.com",
					AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
					Count:           1,
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: fmt.Sprintf("device.attributes['gpu.nvidia.com'].profile == '%s'", name)}}},
				},
			}}}},
		}
	}
	return out
}

// placeUntilFailure allocates the stream one claim at a time, each on top
// of the ones before, and returns how many were placed before the first
// that did not fit.
func placeUntilFailure(t *testing.T, strategy allocator.Strategy, stream []*resourcev1.ResourceClaim) int {
	t.Helper()
	n := examplegen.DGXH100Node
	pools := pool.Assemble(n.Slices(examplegen.Mixins))
	var classes []*resourcev1.DeviceClass
	for _, c := range examplegen.NVIDIAClasses() {
		classes = append(classes, c.(*resourcev1.DeviceClass))
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Node}}
	var allocated []*resourcev1.ResourceClaim
	for i, claim := range stream {
		a, err := allocator.New(allocator.Input{Pools: pools, Classes: classes, Allocated: allocated}, allocator.Options{Strategy: strategy})
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Allocate(context.Background(), node, []*resourcev1.ResourceClaim{claim})
		if allocator.IsUnfit(err) {
			return i
		}
		if err != nil {
			t.Fatal(err)
		}
		claim = claim.DeepCopy()
		claim.Status.Allocation = res[0]
		allocated = append(allocated, claim)
	}
	return len(stream)
}

// TestBestFitPacksMIGStream is the fragmentation claim of best-fit: on
// random streams of MIG claims against a DGX H100, it places more claims
// than first-fit before the first failure, summed over the streams. A
// greedy online choice cannot win on every stream (it cannot know the
// next claim), so single streams are only logged; the sum is the claim.
func TestBestFitPacksMIGStream(t *testing.T) {
	const streams, length = 24, 60
	var ff, bf, wins, ties, losses int
	for seed := range uint64(streams) {
		stream := migStream(seed, length)
		f := placeUntilFailure(t, allocator.FirstFit, stream)
		b := placeUntilFailure(t, allocator.BestFit, stream)
		t.Logf("stream %2d: first-fit placed %2d, best-fit %2d", seed, f, b)
		ff += f
		bf += b
		switch {
		case b > f:
			wins++
		case b == f:
			ties++
		default:
			losses++
		}
	}
	t.Logf("total over %d streams: first-fit %d, best-fit %d claims before the first failure (best-fit wins %d, ties %d, loses %d)",
		streams, ff, bf, wins, ties, losses)
	// Offline, knowing each whole stream, at most 619 claims fit before a
	// failure (exhaustive search over per-GPU configurations), against 593
	// for first-fit and 606 for best-fit: the room above first-fit is 4 %,
	// best-fit takes half of it (+2.2 %), and the margin asked is 1 %.
	if 100*bf < 101*ff {
		t.Errorf("best-fit placed %d claims in total, first-fit %d: best-fit should pack at least 1 %% more", bf, ff)
	}
}
