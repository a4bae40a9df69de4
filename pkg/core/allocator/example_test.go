package allocator_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
)

// A node with one GPU of 8 memory slices, published as a partitionable
// pool (KEP-4815): a counter slice with the GPU's counter set, and a
// device slice with the whole GPU and its 4g and 1g partitions, each
// consuming the slices it covers. Another claim holds the first 4g
// partition; the pod asks for one 4g partition, then for the whole GPU.
func Example() {
	const driver = "gpu.example.com"
	slices := func(n int64) map[string]api.Counter {
		return map[string]api.Counter{"memory-slices": {Value: *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	partition := func(name, profile string, size int64) api.Device {
		return api.Device{
			Name:             name,
			Attributes:       map[api.QualifiedName]api.DeviceAttribute{"profile": {StringValue: ptr.To(profile)}},
			ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: slices(size)}},
		}
	}
	spec := func(devices []api.Device, counters []api.CounterSet) api.ResourceSliceSpec {
		return api.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To("node-1"),
			Pool:    api.ResourcePool{Name: "node-1", Generation: 1, ResourceSliceCount: 2},
			Devices: devices, SharedCounters: counters,
		}
	}
	in := allocator.Input{
		Pools: pool.Assemble([]*api.ResourceSlice{
			{ObjectMeta: metav1.ObjectMeta{Name: "node-1-counters"},
				Spec: spec(nil, []api.CounterSet{{Name: "gpu-0", Counters: slices(8)}})},
			{ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpus"}, Spec: spec([]api.Device{
				partition("gpu-0", "whole", 8),
				partition("gpu-0-4g-0", "4g", 4), partition("gpu-0-4g-1", "4g", 4),
				partition("gpu-0-1g-0", "1g", 1), partition("gpu-0-1g-1", "1g", 1),
			}, nil)},
		}),
		Classes: []*resourcev1.DeviceClass{{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{
				{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}},
		}},
		Allocated: []*resourcev1.ResourceClaim{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
					{Request: "gpu", Driver: driver, Pool: "node-1", Device: "gpu-0-4g-0"}}}}},
		}},
	}
	a, err := allocator.New(in, allocator.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	claim := func(name, profile string) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: fmt.Sprintf(`device.attributes["gpu.example.com"].profile == %q`, profile)}}},
				},
			}}}},
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	ctx := context.Background()

	// A scheduler plans the pod's claims once and asks every node.
	plan := a.Plan([]*resourcev1.ResourceClaim{claim("half", "4g")})
	results, err := plan.Allocate(ctx, node)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results[0].Devices.Results {
		fmt.Printf("request %s: %s/%s/%s\n", r.Request, r.Driver, r.Pool, r.Device)
	}
	fmt.Println("pinned to", results[0].NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values)

	// Allocate is Plan and Allocate in one call. The whole GPU needs all
	// 8 memory slices, and the other claim's partition holds 4: the
	// explanation counts each device under the first check it failed.
	_, err = a.Allocate(ctx, node, []*resourcev1.ResourceClaim{claim("whole", "whole")})
	fmt.Println("unfit:", allocator.IsUnfit(err))
	fmt.Println(err)
	// Output:
	// request gpu: gpu.example.com/node-1/gpu-0-4g-1
	// pinned to [node-1]
	// unfit: true
	// claims do not fit on node node-1: default/whole/gpu: 0 of 1 devices (Allocated=1 Selector=3 CounterExhausted=1)
}
