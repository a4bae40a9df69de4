//go:build !k8s138

package schedplugin

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// What the plugin calls on kube-scheduler's framework that differs
// between the minors dractl-scheduler is built for; one file per minor
// (docs/versions.md). This is the framework of kube-scheduler 1.37.

// podGroupCycle is the state of the pod's group cycle, nil outside one.
func podGroupCycle(cs fwk.CycleState) fwk.PodGroupCycleState { return cs.GetPodGroupSchedulingCycle() }

// kubeMinor is the minor of the kube-scheduler this build links, whose
// in-tree DynamicResources plugin the allocator answers as.
const kubeMinor = 37

// unscheduledPods are the group's pods the cycle is scheduling.
func unscheduledPods(info fwk.PodGroupInfo) []*v1.Pod { return info.GetUnscheduledPods() }
