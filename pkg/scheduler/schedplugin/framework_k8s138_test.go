//go:build k8s138

package schedplugin

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	draapi "k8s.io/dynamic-resource-allocation/api"
	fwk "k8s.io/kube-scheduler/framework"
)

// The methods of the test fakes that kube-scheduler 1.38's framework
// names (framework_k8s138.go).

func (s *fakeCycleState) GetPodGroupCycleState() fwk.PodGroupCycleState { return s.group }

func (g fakeGroupInfo) GetAllUnscheduledPods() []*v1.Pod { return g.pods }

func (g fakeGroupInfo) GetKey() fwk.EntityKey {
	return fwk.PodGroupKey(g.group.Namespace, g.group.Name)
}

// trackerSliceInformer: kube-scheduler 1.38 starts its slice tracker on an
// informer of k8s.io/dynamic-resource-allocation's own slice type.
func trackerSliceInformer(f informers.SharedInformerFactory) draapi.ResourceSliceIndexInformer {
	return draapi.NewInformerForResourceSlice(f)
}
