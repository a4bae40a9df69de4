package allocator

import (
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
)

// Device taints (DRADeviceTaints): a device with a NoSchedule or NoExecute
// taint that the request does not tolerate is not allocated. Candidates
// check it when the list is built (ReasonTaint); devices of an "All"
// request when they are picked, after counters, in upstream's order.

// blockedByTaint: with DRADeviceTaints on, an untolerated NoSchedule or
// NoExecute taint prevents allocation.
func (at *attempt) blockedByTaint(al *alternative, d *devInfo) bool {
	return at.a.g.taints && d.tainted && taintBlocks(d.d.Taints, al.req.tols)
}

// taintBlocks: only NoSchedule and NoExecute taints prevent allocation;
// None and unknown effects are informational.
func taintBlocks(taints []api.DeviceTaint, tols []resourcev1.DeviceToleration) bool {
	return blockingTaint(taints, tols) != nil
}

// blockingTaint returns the first taint that prevents allocation, nil if
// none does.
func blockingTaint(taints []api.DeviceTaint, tols []resourcev1.DeviceToleration) *api.DeviceTaint {
	for i, t := range taints {
		if t.Effect != resourcev1.DeviceTaintEffectNoSchedule && t.Effect != resourcev1.DeviceTaintEffectNoExecute {
			continue
		}
		if !tolerated(t, tols) {
			return &taints[i]
		}
	}
	return nil
}

// taintString is how explanations write a taint, as kubectl writes a
// node's: key=value:Effect, or key:Effect without a value.
func taintString(t *api.DeviceTaint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

func tolerated(t api.DeviceTaint, tols []resourcev1.DeviceToleration) bool {
	for _, tol := range tols {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		switch tol.Operator {
		case "", resourcev1.DeviceTolerationOpEqual:
			if tol.Value == t.Value {
				return true
			}
		case resourcev1.DeviceTolerationOpExists:
			return true
		}
	}
	return false
}
