package schedplugin

import (
	"context"
	"errors"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dractl/dractl/pkg/core/coretest"
)

// TestNewLeaderStartsFromTheAPI: a leader reserves gpu-0 for pod-a, its
// write of the allocation ends with an unknown outcome, and it dies
// holding the devices. kube-scheduler exits when it loses its Lease, so
// the next leader is another process: its plugin holds no assumption of
// the old one and places by what the API shows, the old leader's write
// if it was stored, and nothing of it if it was not.
func TestNewLeaderStartsFromTheAPI(t *testing.T) {
	ctx := context.Background()
	objs := append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("b", 1))
	old := newCluster(t, nil, objs...)
	old.client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return a.GetSubresource() == "status", nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	})
	podA := gpuPod("pod-a", "a")
	cs, node, _ := schedule(t, old, podA, node1)
	if node != "node-1" {
		t.Fatal("pod-a not placed")
	}
	if st := old.pl.PreBind(ctx, cs, podA, node); st.IsSuccess() {
		t.Fatal("PreBind succeeded through a failing API")
	}
	old.pl.Unreserve(ctx, cs, podA, node)
	if _, node, _ := schedule(t, old, gpuPod("pod-b", "b"), node1); node != "" {
		t.Fatalf("the old leader placed pod-b on %s while its write's outcome is unknown", node)
	}
	s, err := readState(cs)
	coretest.Must(t, err)
	written := s.allocations[0]

	for _, tc := range []struct {
		name   string
		stored bool
	}{
		{"the write was not stored", false},
		{"the write was stored", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := gpuClaim("a", 1)
			if tc.stored {
				a.ResourceVersion = "2"
				a.Finalizers = []string{resourcev1.Finalizer}
				a.Status.Allocation = written
				a.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: podA.Name, UID: podA.UID}}
			}
			next := newCluster(t, nil, append(gpuObjects(t), a, gpuClaim("b", 1))...)
			st := next.pl.feed.st
			if mine, others, held := st.AssumedBy(ownerSelf), st.AssumedBy(ownerOther), st.OnHold(); len(mine)+len(others)+len(held) != 0 {
				t.Fatalf("the new leader starts with assumptions: own %v, other plugins' %v, on hold %v", mine, others, held)
			}
			_, node, statuses := schedule(t, next, gpuPod("pod-b", "b"), node1)
			if placed := node == "node-1"; placed == tc.stored {
				t.Fatalf("pod-b placed: %v, want %v (%v)", placed, !tc.stored, statuses)
			}
		})
	}
}
