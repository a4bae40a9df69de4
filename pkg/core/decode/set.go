package decode

import (
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/workload"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// Set holds decoded objects grouped by kind, each list in input order.
type Set struct {
	Slices         []*api.ResourceSlice
	Classes        []*resourcev1.DeviceClass
	Claims         []*resourcev1.ResourceClaim
	ClaimTemplates []*resourcev1.ResourceClaimTemplate
	TaintRules     []*resourcev1.DeviceTaintRule
	Nodes          []*corev1.Node
	Pods           []*corev1.Pod
	Workloads      []*workload.Workload
	// Sources maps each object pointer above to where it was read.
	Sources map[any]Source
}

// Group sorts objects by kind. Objects of other types are ignored; Paths
// and Bytes never return any.
func Group(objs []Object) *Set {
	s := &Set{Sources: make(map[any]Source, len(objs))}
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *api.ResourceSlice:
			s.Slices = append(s.Slices, v)
		case *resourcev1.DeviceClass:
			s.Classes = append(s.Classes, v)
		case *resourcev1.ResourceClaim:
			s.Claims = append(s.Claims, v)
		case *resourcev1.ResourceClaimTemplate:
			s.ClaimTemplates = append(s.ClaimTemplates, v)
		case *resourcev1.DeviceTaintRule:
			s.TaintRules = append(s.TaintRules, v)
		case *corev1.Node:
			s.Nodes = append(s.Nodes, v)
		case *corev1.Pod:
			s.Pods = append(s.Pods, v)
		case *workload.Workload:
			s.Workloads = append(s.Workloads, v)
		default:
			continue
		}
		s.Sources[o.Obj] = o.Source
	}
	return s
}

// Source returns where obj was read, or false for an object not in s.
func (s *Set) Source(obj any) (Source, bool) {
	src, ok := s.Sources[obj]
	return src, ok
}
