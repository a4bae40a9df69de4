package schedplugin

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/state"
)

func TestWaitlist(t *testing.T) {
	var batches [][]string
	w := newWaitlist(func(pods map[string]*v1.Pod) {
		batches = append(batches, slices.Sorted(maps.Keys(pods)))
	})
	expect := func(step string, want ...[]string) {
		t.Helper()
		if !slices.EqualFunc(batches, want, slices.Equal) {
			t.Errorf("%s: activated %v, want %v", step, batches, want)
		}
		batches = nil
	}
	a, b, c, d := gpuPod("a", "x"), gpuPod("b", "x"), gpuPod("c", "x"), gpuPod("d", "x")

	before := w.current()
	w.turnedAway(a, before)
	w.turnedAway(b, before)
	w.turnedAway(c, before)
	expect("turned away on the current state")
	w.drop(b.UID)
	w.roomMade()
	expect("room made", []string{"default/a", "default/c"})
	w.roomMade()
	expect("room made again: nobody waits")

	// Turned away on a snapshot taken before room was made: the pod may
	// not have seen the room, and goes straight back.
	w.turnedAway(d, before)
	expect("turned away on an older state", []string{"default/d"})
	w.turnedAway(a, w.current())
	w.roomMade()
	expect("turned away after the room was made, then more room", []string{"default/a"})
}

// allocatedClaim is claim name holding gpu-0 of node-1 (all its memory).
func allocatedClaim(name string) *resourcev1.ResourceClaim {
	c := gpuClaim(name, 1)
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{at.Result("gpu", driver, "node-1", "gpu-0")}}}
	return c
}

// deallocate removes the claim's allocation in the API, as the
// resourceclaim controller does when its last consumer is gone.
func deallocate(t *testing.T, c *cluster, name string) *resourcev1.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	claim, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
	at.Must(t, err)
	claim = claim.DeepCopy()
	claim.Status.Allocation = nil
	claim.Status.ReservedFor = nil
	claim.ResourceVersion = "2"
	claim, err = c.client.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	at.Must(t, err)
	return claim
}

// waitActivated waits for the informer goroutines to hand the change to
// the State and returns the pods activated meanwhile (and before).
func waitActivated(t *testing.T, c *cluster, want int) []string {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = append(got, c.handle.takeActivated()...)
		return len(got) >= want, nil
	})
	if err != nil {
		t.Fatalf("activated %v, want %d pods", got, want)
	}
	return got
}

// The scheduler's queue learns of a deallocation from its claim tracker
// and may try a waiting pod before the State, fed by its own informer
// handler, has applied it. The pod is then turned away for a device that
// is free, and the event that would requeue it is gone: the State must
// send it back once it has the deallocation.
func TestDeallocationSeenLateActivatesPod(t *testing.T) {
	c := newCluster(t, inline, append(gpuObjects(t), allocatedClaim("a"), gpuClaim("b", 1))...)
	podB := gpuPod("pod-b", "b")

	// The tracker (the queue's view) has the deallocation, the State not.
	freed := allocatedClaim("a")
	freed.Status.Allocation = nil
	c.tracker.set(freed)
	if _, node, statuses := schedule(t, c, podB, node1); node != "" {
		t.Fatalf("pod-b placed on %s while the State still holds gpu-0", node)
	} else if msg := statuses[0].Message(); !strings.Contains(msg, "counter memory of gpu-0-counters exhausted") {
		t.Fatalf("pod-b rejected with %q", msg)
	}
	if got := c.handle.takeActivated(); len(got) > 0 {
		t.Fatalf("activated %v before the State released anything", got)
	}

	c.tracker.set(deallocate(t, c, "a"))
	if got := waitActivated(t, c, 1); !slices.Equal(got, []string{"default/pod-b"}) {
		t.Fatalf("activated %v, want default/pod-b", got)
	}
	if _, node, statuses := schedule(t, c, podB, node1); node != "node-1" {
		t.Fatalf("pod-b not placed after activation: %v", statuses)
	}
}

// The State applies the deallocation while the pod's cycle runs on an
// older snapshot: the rejection sends the pod straight back.
func TestDeallocationDuringCycleActivatesPod(t *testing.T) {
	c := newCluster(t, nil, append(gpuObjects(t), allocatedClaim("a"), gpuClaim("b", 1))...)
	podB := gpuPod("pod-b", "b")
	ctx := context.Background()
	cs := newCycleState()
	if _, st := c.pl.PreFilter(ctx, cs, podB, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}

	c.tracker.set(deallocate(t, c, "a"))
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		a, ok := c.pl.st.Snapshot().Claim(state.ClaimKey{Namespace: "default", Name: "a"})
		return ok && a.Status.Allocation == nil, nil
	})
	at.Must(t, err)
	if got := c.handle.takeActivated(); len(got) > 0 {
		t.Fatalf("activated %v while nobody was turned away", got)
	}

	if st := c.pl.Filter(ctx, cs, podB, node1); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("Filter on the cycle's snapshot: %v, want a rejection", st)
	}
	if got := c.handle.takeActivated(); !slices.Equal(got, []string{"default/pod-b"}) {
		t.Fatalf("activated %v, want default/pod-b at once", got)
	}
}

// A slice with devices for a node the pod was turned away from sends the
// pod back; a pod that was placed is not sent back.
func TestNewSliceActivatesPod(t *testing.T) {
	c := newCluster(t, nil, append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("b", 1))...)
	podA, podB := gpuPod("pod-a", "a"), gpuPod("pod-b", "b")
	if _, node, _ := schedule(t, c, podB, node2); node != "" {
		t.Fatalf("pod-b placed on %s, which has no devices", node)
	}
	if _, node, statuses := schedule(t, c, podA, node2, node1); node != "node-1" {
		t.Fatalf("pod-a not placed: %v", statuses)
	}
	s, err := api.ToUpstream(at.Slice("node-2-devices").Driver(driver).Pool("node-2").Node("node-2").Device(at.Device("gpu-0")).Obj())
	at.Must(t, err)
	_, err = c.client.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{})
	at.Must(t, err)
	if got := waitActivated(t, c, 1); !slices.Equal(got, []string{"default/pod-b"}) {
		t.Fatalf("activated %v, want default/pod-b only", got)
	}
}
