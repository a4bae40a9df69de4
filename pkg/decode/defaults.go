package decode

import (
	"reflect"

	"github.com/dractl/dractl/pkg/api"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// The defaults below are those kube-apiserver 1.37 applies to
// resource.k8s.io/v1 objects: the +default markers of the v1 types (only
// DeviceToleration.operator has one) and the hand-written defaulters of
// pkg/apis/resource/v1 (ExactDeviceRequest, DeviceSubRequest, DeviceTaint).
// Every function is idempotent.

// SetDefaults applies API-server defaults to one of the object types that
// Object.Obj holds. It reports false, changing nothing, for other types.
func SetDefaults(obj any) bool {
	switch o := obj.(type) {
	case *api.ResourceSlice:
		defaultResourceSlice(o)
	case *resourcev1.DeviceClass:
		defaultDeviceClass(o)
	case *resourcev1.ResourceClaim:
		defaultResourceClaim(o)
	case *resourcev1.ResourceClaimTemplate:
		defaultResourceClaimTemplate(o)
	case *corev1.Node:
		defaultNode(o)
	case *corev1.Pod:
		defaultPod(o)
	default:
		def, ok := defaulters[reflect.TypeOf(obj)]
		if !ok {
			return false
		}
		def(obj)
	}
	return true
}

// defaultResourceSlice applies nothing. The server's only ResourceSlice
// default sets spec.devices[].taints[].timeAdded to the time of the create
// request when it is unset. A manifest has no such time: inventing "now"
// would make decoding the same file twice give different objects, and
// would make taints look fresh that a real cluster might have added long
// ago. So timeAdded stays nil, and readers treat nil as "unknown".
func defaultResourceSlice(*api.ResourceSlice) {}

// defaultDeviceClass applies nothing: no DeviceClass field has a default.
func defaultDeviceClass(*resourcev1.DeviceClass) {}

func defaultResourceClaim(c *resourcev1.ResourceClaim) {
	defaultClaimSpec(&c.Spec)
	if c.Status.Allocation != nil {
		results := c.Status.Allocation.Devices.Results
		for i := range results {
			defaultTolerations(results[i].Tolerations)
		}
	}
}

func defaultResourceClaimTemplate(t *resourcev1.ResourceClaimTemplate) {
	defaultClaimSpec(&t.Spec.Spec)
}

// defaultNode and defaultPod apply nothing. The core/v1 defaults are many
// (restart and DNS policies, container ports and probes, termination
// messages, ...) and none of them bears on what dractl reads from nodes
// and pods: names, labels, and a pod's resourceClaims. Applying a subset
// would only make objects look server-defaulted when they are not.
func defaultNode(*corev1.Node) {}
func defaultPod(*corev1.Pod)   {}

func defaultClaimSpec(s *resourcev1.ResourceClaimSpec) {
	for i := range s.Devices.Requests {
		r := &s.Devices.Requests[i]
		if e := r.Exactly; e != nil {
			e.AllocationMode, e.Count = defaultMode(e.AllocationMode, e.Count)
			defaultTolerations(e.Tolerations)
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			sub.AllocationMode, sub.Count = defaultMode(sub.AllocationMode, sub.Count)
			defaultTolerations(sub.Tolerations)
		}
	}
}

// defaultMode: an unset mode means ExactCount, and ExactCount with no
// count means one device. A count given with mode All is left for
// validation to reject.
func defaultMode(mode resourcev1.DeviceAllocationMode, count int64) (resourcev1.DeviceAllocationMode, int64) {
	if mode == "" {
		mode = resourcev1.DeviceAllocationModeExactCount
	}
	if mode == resourcev1.DeviceAllocationModeExactCount && count == 0 {
		count = 1
	}
	return mode, count
}

func defaultTolerations(ts []resourcev1.DeviceToleration) {
	for i := range ts {
		if ts[i].Operator == "" {
			ts[i].Operator = resourcev1.DeviceTolerationOpEqual
		}
	}
}
