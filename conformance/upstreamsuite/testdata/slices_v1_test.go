// Dropped into the suite's module copy beside adapter_test.go for the
// releases whose allocator factory takes resource.k8s.io/v1 slices and
// whose allocated state names shares (1.37); not compiled as part of the
// dractl repository.
package dractl

import (
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured/internal"
)

// kubeMinor is the Kubernetes minor whose answers the suite of v0.37
// expects: the allocator judges as that minor's kube-scheduler.
const kubeMinor = 37

// suiteSlice is the slice type the suite hands the allocator factory.
type suiteSlice = resourcev1.ResourceSlice

func toV1(s *suiteSlice) (*resourcev1.ResourceSlice, error) { return s, nil }

// stateResults are the allocation results an AllocatedState stands for:
// each exclusive device, each share by its ID, and each device's
// aggregated consumed capacity as one more share.
func stateResults(st internal.AllocatedState) []resourcev1.DeviceRequestAllocationResult {
	var out []resourcev1.DeviceRequestAllocationResult
	for id := range st.AllocatedDevices {
		out = append(out, resourcev1.DeviceRequestAllocationResult{Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String()})
	}
	for id := range st.AllocatedSharedDeviceIDs {
		share := types.UID(id.ShareID.String())
		out = append(out, resourcev1.DeviceRequestAllocationResult{Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String(), ShareID: &share})
	}
	for id, consumed := range st.AggregatedCapacity {
		share := types.UID("aggregated-" + id.String())
		r := resourcev1.DeviceRequestAllocationResult{Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String(), ShareID: &share,
			ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{}}
		for name, q := range consumed {
			r.ConsumedCapacity[name] = q.DeepCopy()
		}
		out = append(out, r)
	}
	return out
}
