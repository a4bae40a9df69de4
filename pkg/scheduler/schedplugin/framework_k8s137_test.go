//go:build !k8s138

package schedplugin

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// The methods of the test fakes that kube-scheduler 1.37's framework
// names (framework_k8s137.go).

func (s *fakeCycleState) GetPodGroupSchedulingCycle() fwk.PodGroupCycleState { return s.group }

func (g fakeGroupInfo) GetUnscheduledPods() []*v1.Pod { return g.pods }

func (g fakeGroupInfo) GetKey() string { return g.group.Namespace + "/" + g.group.Name }

// trackerSliceInformer is the slice informer kube-scheduler 1.37 starts its
// slice tracker on: the shared informers' own.
func trackerSliceInformer(f informers.SharedInformerFactory) resourceinformers.TypedResourceSliceInformer {
	return f.Resource().V1().ResourceSlices()
}
