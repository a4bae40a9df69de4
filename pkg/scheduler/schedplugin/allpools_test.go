package schedplugin

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
)

// A request for all devices on a node that sees an invalid pool: the
// in-tree plugin of kube-scheduler 1.38 fails only that node
// (ErrFailedAllocationOnNode), so the pod still lands on a node whose
// pools are valid; 1.37's fails the pod with an error, which ends the
// cycle. The build's kubeMinor decides which the plugin does.
func TestAllRequestOverInvalidPool(t *testing.T) {
	var objs []runtime.Object
	for _, s := range []*api.ResourceSlice{
		// Consumes a counter set nobody publishes: the pool is invalid.
		at.Slice("node-1-devices").Driver(driver).Pool("node-1").Node("node-1").Count(1).
			Device(at.Device("gpu-0").Consumes("gpu-0-counters", "memory", "40Gi")).Obj(),
		at.Slice("node-2-devices").Driver(driver).Pool("node-2").Node("node-2").Count(1).
			Device(at.Device("gpu-0")).Obj(),
	} {
		v, err := api.ToUpstream(s)
		at.Must(t, err)
		v.UID = types.UID("uid-" + v.Name)
		objs = append(objs, v)
	}
	claim := at.Claim("all").Request(at.Request("gpu", "gpu").All()).Obj()
	claim.ResourceVersion = "1"
	objs = append(objs, at.Class("gpu", `device.driver == "`+driver+`"`), claim)
	c := newCluster(t, nil, objs...)
	pod := gpuPod("pod-all", "all")

	ctx := context.Background()
	cs := newCycleState()
	if _, st := c.pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	st := c.pl.Filter(ctx, cs, pod, node1)
	const words = "asks for all devices, but resource pool " + driver + "/node-1 is currently invalid"
	if !strings.Contains(st.Message(), words) {
		t.Errorf("node-1's Filter status %v, want it to say %q", st, words)
	}
	want := fwk.Error
	if kubeMinor >= 38 {
		want = fwk.UnschedulableAndUnresolvable
	}
	if st.Code() != want {
		t.Errorf("node-1's Filter status code %v at 1.%d, want %v", st.Code(), kubeMinor, want)
	}
	// What the framework makes of node-1's status differs; node-2 fits
	// either way.
	if st := c.pl.Filter(ctx, cs, pod, node2); !st.IsSuccess() {
		t.Errorf("node-2, whose pool is valid: %v, want the pod to fit", st)
	}
}
