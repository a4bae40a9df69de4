package state_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/state"
)

// gpuNode is a node whose driver publishes two GPUs in one slice.
func gpuNode(name string) (*corev1.Node, *resourcev1.ResourceSlice) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			Pool:     resourcev1.ResourcePool{Name: name, ResourceSliceCount: 1},
			NodeName: &node.Name,
			Devices:  []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
		},
	}
	return node, slice
}

// gpuClass selects the devices of gpu.example.com.
var gpuClass = &resourcev1.DeviceClass{
	ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
	Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{
		{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}},
	}},
}

// gpuClaim asks for one GPU.
func gpuClaim(name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu",
				AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
}

// withAllocation is the claim with its allocation in status, as Assume
// takes it and as the API shows it once written.
func withAllocation(c *resourcev1.ResourceClaim, a *resourcev1.AllocationResult) *resourcev1.ResourceClaim {
	c = c.DeepCopy()
	c.Status.Allocation = a
	return c
}

func devices(a *resourcev1.AllocationResult) []string {
	var out []string
	for _, r := range a.Devices.Results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	return out
}

// A scheduler's cycle on a State: the informers' objects go in as deltas;
// each pod's pending claims are allocated on a snapshot, node by node; the
// chosen node's result is assumed, so that the next pod's snapshot sees
// those devices taken before the API does.
func Example() {
	st := state.New(state.Options{})
	node, slice := gpuNode("node-1")
	for _, err := range []error{st.SetSlice(slice), st.SetClass(gpuClass)} {
		if err != nil {
			fmt.Println(err)
		}
	}
	for _, pod := range []string{"a", "b", "c"} {
		claim := gpuClaim(pod)
		if err := st.SetClaim(claim); err != nil {
			fmt.Println(err)
		}
		// One snapshot and one Cycle per pod; Allocate per node, from
		// as many goroutines as there are nodes to try.
		cycle := st.Snapshot().Cycle([]*resourcev1.ResourceClaim{claim}, state.CycleOptions{})
		res, err := cycle.Allocate(context.Background(), node)
		var unfit *allocator.UnfitError
		switch {
		case errors.As(err, &unfit):
			fmt.Printf("pod %s: does not fit on %s\n", pod, node.Name)
			continue
		case err != nil:
			fmt.Println(err)
			continue
		}
		fmt.Printf("pod %s: %v on %s\n", pod, devices(res[0]), node.Name)
		if err := st.Assume(withAllocation(claim, res[0])); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// pod a: [node-1/gpu-0] on node-1
	// pod b: [node-1/gpu-1] on node-1
	// pod c: does not fit on node-1
}

// A Cycle prepares a pod's claims once (classes, compiled selectors) and
// is then asked for every node; each node sees only its own pools and
// those that select it.
func ExampleSnapshot_Cycle() {
	st := state.New(state.Options{})
	var nodes []*corev1.Node
	for _, name := range []string{"node-1", "node-2"} {
		node, slice := gpuNode(name)
		nodes = append(nodes, node)
		if err := st.SetSlice(slice); err != nil {
			fmt.Println(err)
		}
	}
	if err := st.SetClass(gpuClass); err != nil {
		fmt.Println(err)
	}
	// A pod with two claims: they are allocated together, on one node.
	claims := []*resourcev1.ResourceClaim{gpuClaim("x"), gpuClaim("y")}
	for _, c := range claims {
		if err := st.SetClaim(c); err != nil {
			fmt.Println(err)
		}
	}
	snap := st.Snapshot()
	cycle := snap.Cycle(claims, state.CycleOptions{Strategy: allocator.FirstFit})
	for _, node := range nodes {
		res, err := cycle.Allocate(context.Background(), node)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: x %v, y %v\n", node.Name, devices(res[0]), devices(res[1]))
	}
	fmt.Println("snapshot version:", snap.Version())
	// Output:
	// node-1: x [node-1/gpu-0], y [node-1/gpu-1]
	// node-2: x [node-2/gpu-0], y [node-2/gpu-1]
	// snapshot version: 5
}

// An assumed allocation holds its devices from Assume on. It ends when the
// API shows the claim allocated (the observed allocation replaces it), or
// when the caller forgets it (the binding failed). What the caller records
// of it meanwhile (who made it, in which version it was written) lives
// and ends with it.
func ExampleState_Assume() {
	st := state.New(state.Options{})
	node, slice := gpuNode("node-1")
	claim := gpuClaim("a")
	for _, err := range []error{st.SetSlice(slice), st.SetClass(gpuClass), st.SetClaim(claim)} {
		if err != nil {
			fmt.Println(err)
		}
	}
	res, err := st.Snapshot().Cycle([]*resourcev1.ResourceClaim{claim}, state.CycleOptions{}).Allocate(context.Background(), node)
	if err != nil {
		fmt.Println(err)
		return
	}
	assumed := withAllocation(claim, res[0])
	key := state.KeyOf(claim)
	if err := st.AssumeBy(assumed, "my-scheduler"); err != nil {
		fmt.Println(err)
	}
	fmt.Println("assumed:", st.Snapshot().Assumed(key), st.AssumedBy("my-scheduler"))

	// The caller wrote the allocation; the API stored it in version 42.
	if err := st.SetWritten(key.Namespace, key.Name, "42"); err != nil {
		fmt.Println(err)
	}
	a, _ := st.Assumption(key)
	fmt.Printf("owner %s, written in %s\n", a.Owner, a.Written)

	// The informer delivers the written claim: the allocation is observed.
	written := assumed.DeepCopy()
	written.ResourceVersion = "42"
	if err := st.SetClaim(written); err != nil {
		fmt.Println(err)
	}
	_, stillAssumed := st.Assumption(key)
	fmt.Println("assumed:", st.Snapshot().Assumed(key), stillAssumed)

	// Forget is for an assumption whose binding failed; there is none now.
	var notFound *state.NotFoundError
	fmt.Println("forget:", errors.As(st.Forget(key.Namespace, key.Name), &notFound))
	// Output:
	// assumed: true [default/a]
	// owner my-scheduler, written in 42
	// assumed: false false
	// forget: true
}
