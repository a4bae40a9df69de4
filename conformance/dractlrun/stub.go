//go:build noallocator

package dractlrun

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/conformance/scenario"
)

// Available reports whether pkg/core/allocator was compiled in.
const Available = false

type Prepared struct{}

func Prepare(s *scenario.Scenario) (*Prepared, error) {
	return nil, errors.New("built with -tags noallocator")
}

func (p *Prepared) Allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) scenario.Outcome {
	return scenario.Outcome{Kind: scenario.Fatal, Err: errors.New("built with -tags noallocator")}
}
