//go:build k8s138

package schedplugin

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// The framework of kube-scheduler 1.38 (see framework_k8s137.go), which
// renamed both.

const kubeMinor = 38

func podGroupCycle(cs fwk.CycleState) fwk.PodGroupCycleState { return cs.GetPodGroupCycleState() }

func unscheduledPods(info fwk.PodGroupInfo) []*v1.Pod { return info.GetAllUnscheduledPods() }
