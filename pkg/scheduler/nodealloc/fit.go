package nodealloc

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Amounts are node resources in the units kube-scheduler counts them:
// milli-CPU and bytes; Scalar holds hugepages (and whatever else a node
// lists, which Fit ignores as kube-scheduler's DRA plugin does).
type Amounts struct {
	MilliCPU, Memory, EphemeralStorage int64
	Scalar                             map[corev1.ResourceName]int64
}

// AmountsOf converts a resource list to Amounts.
func AmountsOf(l corev1.ResourceList) Amounts {
	var a Amounts
	for name, q := range l {
		switch name {
		case corev1.ResourceCPU:
			a.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			a.Memory = q.Value()
		case corev1.ResourceEphemeralStorage:
			a.EphemeralStorage = q.Value()
		default:
			if a.Scalar == nil {
				a.Scalar = map[corev1.ResourceName]int64{}
			}
			a.Scalar[name] = q.Value()
		}
	}
	return a
}

// Add returns a+b.
func (a Amounts) Add(b Amounts) Amounts {
	out := Amounts{MilliCPU: a.MilliCPU + b.MilliCPU, Memory: a.Memory + b.Memory, EphemeralStorage: a.EphemeralStorage + b.EphemeralStorage}
	for _, m := range []map[corev1.ResourceName]int64{a.Scalar, b.Scalar} {
		for name, v := range m {
			if out.Scalar == nil {
				out.Scalar = map[corev1.ResourceName]int64{}
			}
			out.Scalar[name] += v
		}
	}
	return out
}

// Fit checks a pod's demand against what the node has left (allocatable
// minus requested): CPU, memory, ephemeral storage and hugepages, the
// node resources devices may stand for. It returns kube-scheduler's
// reason for each resource short ("Insufficient cpu"), and whether the
// demand exceeds the node's allocatable, which no preemption can help.
func Fit(demand corev1.ResourceList, allocatable, requested Amounts) (reasons []string, unresolvable bool) {
	d := AmountsOf(demand)
	short := func(name string, want, have, used int64) {
		if want > 0 && want > have-used {
			reasons = append(reasons, "Insufficient "+name)
			if want > have {
				unresolvable = true
			}
		}
	}
	short(string(corev1.ResourceCPU), d.MilliCPU, allocatable.MilliCPU, requested.MilliCPU)
	short(string(corev1.ResourceMemory), d.Memory, allocatable.Memory, requested.Memory)
	short(string(corev1.ResourceEphemeralStorage), d.EphemeralStorage, allocatable.EphemeralStorage, requested.EphemeralStorage)
	for _, name := range scalarNames(d.Scalar) {
		if isHugePages(name) {
			want := d.Scalar[name]
			have, used := allocatable.Scalar[name], requested.Scalar[name]
			if want > have-used {
				reasons = append(reasons, fmt.Sprintf("Insufficient %s", name))
				if want > have {
					unresolvable = true
				}
			}
		}
	}
	return reasons, unresolvable
}

func scalarNames(m map[corev1.ResourceName]int64) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
