// Dropped into the suite's module copy beside adapter_test.go for the
// releases whose allocator factory takes the slices of
// k8s.io/dynamic-resource-allocation/api, the form kube-scheduler's
// tracker keeps them in, and whose allocated state keeps shared devices
// without their share IDs (1.38); not compiled as part of the dractl
// repository.
package dractl

import (
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/structured/internal"
)

// kubeMinor is the Kubernetes minor whose answers the suite of v0.38
// expects: the allocator judges as that minor's kube-scheduler.
const kubeMinor = 38

// suiteSlice is the slice type the suite hands the allocator factory.
type suiteSlice = draapi.ResourceSlice

// toV1 turns the tracker's form back into the API object dractl reads.
func toV1(s *suiteSlice) (*resourcev1.ResourceSlice, error) {
	out := &resourcev1.ResourceSlice{}
	if err := draapi.Convert_api_ResourceSlice_To_v1_ResourceSlice(s, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// stateResults are the allocation results an AllocatedState stands for:
// each exclusive device, one share of each device with shares (the state
// no longer says which), and each device's aggregated consumed capacity
// as one more share.
func stateResults(st internal.AllocatedState) []resourcev1.DeviceRequestAllocationResult {
	var out []resourcev1.DeviceRequestAllocationResult
	for id := range st.AllocatedDevices {
		out = append(out, resourcev1.DeviceRequestAllocationResult{Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String()})
	}
	for id := range st.AllocatedSharedDeviceIDs {
		share := types.UID("shared-" + id.String())
		out = append(out, resourcev1.DeviceRequestAllocationResult{Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String(), ShareID: &share})
	}
	for id, consumed := range st.AggregatedCapacity {
		share := types.UID("aggregated-" + id.String())
		r := resourcev1.DeviceRequestAllocationResult{Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String(), ShareID: &share,
			ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{}}
		for name, q := range consumed {
			r.ConsumedCapacity[resourcev1.QualifiedName(name.String())] = q.DeepCopy()
		}
		out = append(out, r)
	}
	return out
}
