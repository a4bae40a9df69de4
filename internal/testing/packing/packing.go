// Package packing is the experiment behind best-fit's claim: streams of
// MIG claims placed one at a time on a DGX H100 until the first that does
// not fit, first-fit against best-fit. It is a package of its own so that
// the allocator's test and the benchmark table (conformance/cmd/benchtable)
// report the same numbers.
package packing

import (
	"context"
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/pool"
)

// MIGStream is a seeded stream of single-request MIG claims, small
// profiles more often than large ones, as on a shared inference cluster.
func MIGStream(seed uint64, n int) []*resourcev1.ResourceClaim {
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

// PlaceUntilFailure allocates the stream on a DGX H100 node (examplegen,
// mixin form) one claim at a time, each on top of the ones before, and
// returns how many were placed before the first that did not fit. An error
// is anything other than "does not fit".
func PlaceUntilFailure(strategy allocator.Strategy, stream []*resourcev1.ResourceClaim) (int, error) {
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
			return i, err
		}
		res, err := a.Allocate(context.Background(), node, []*resourcev1.ResourceClaim{claim})
		if allocator.IsUnfit(err) {
			return i, nil
		}
		if err != nil {
			return i, err
		}
		claim = claim.DeepCopy()
		claim.Status.Allocation = res[0]
		allocated = append(allocated, claim)
	}
	return len(stream), nil
}

// Packing is the outcome of the experiment over several streams.
type Packing struct {
	Streams, Length    int
	FirstFit, BestFit  int // claims placed before the first failure, summed
	Wins, Ties, Losses int // per stream, best-fit against first-fit
}

// ComparePacking runs streams seeded 0..streams-1 of the given length with
// both strategies.
func ComparePacking(streams, length int) (Packing, error) {
	p := Packing{Streams: streams, Length: length}
	for seed := range uint64(streams) {
		stream := MIGStream(seed, length)
		f, err := PlaceUntilFailure(allocator.FirstFit, stream)
		if err != nil {
			return p, err
		}
		b, err := PlaceUntilFailure(allocator.BestFit, stream)
		if err != nil {
			return p, err
		}
		p.FirstFit += f
		p.BestFit += b
		switch {
		case b > f:
			p.Wins++
		case b == f:
			p.Ties++
		default:
			p.Losses++
		}
	}
	return p, nil
}
