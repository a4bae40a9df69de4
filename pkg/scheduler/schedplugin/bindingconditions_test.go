package schedplugin

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
)

// attachedGPU is one device on node-1 that is usable only once its driver
// reports the condition "attached" (KEP-5007), or never if it reports
// "failed".
func attachedGPU(t *testing.T) []runtime.Object {
	t.Helper()
	v, err := api.ToUpstream(at.Slice("node-1-devices").Driver(driver).Pool("node-1").Node("node-1").Count(1).
		Device(at.Device("gpu-0").BindingConditions("attached")).Obj())
	at.Must(t, err)
	v.UID = types.UID("uid-" + v.Name)
	return []runtime.Object{v, at.Class("gpu", `device.driver == "`+driver+`"`), gpuClaim("a", 1)}
}

// withDeviceConditions is the claim as the tracker shows it once the
// driver reported conds on the allocated device.
func withDeviceConditions(c *resourcev1.ResourceClaim, a *resourcev1.AllocationResult, conds ...metav1.Condition) *resourcev1.ResourceClaim {
	c = c.DeepCopy()
	c.Status.Allocation = a.DeepCopy()
	r := a.Devices.Results[0]
	c.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: r.Driver, Pool: r.Pool, Device: r.Device, Conditions: conds}}
	return c
}

func condition(typ string, status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: "Driver", Message: typ + " reported by the driver", LastTransitionTime: metav1.Now()}
}

// PreBind writes the allocation, then waits for the device's binding
// conditions: it succeeds once they hold, fails at once when a binding
// failure condition holds, and gives up after the binding timeout.
func TestPreBindWaitsForBindingConditions(t *testing.T) {
	for _, tc := range []struct {
		name string
		// timeout is the plugin's binding timeout.
		timeout time.Duration
		// first is what the driver reported when PreBind first looks;
		// later, after that look, when it looks again (nil: no change).
		first, later []metav1.Condition
		err          error
		// looks is the least number of times PreBind read the claim.
		looks int32
	}{
		{name: "attached while waiting", timeout: time.Minute,
			first: []metav1.Condition{condition("attached", metav1.ConditionFalse)},
			later: []metav1.Condition{condition("attached", metav1.ConditionTrue)}, looks: 2},
		{name: "failed", timeout: time.Minute,
			first: []metav1.Condition{condition("attached", metav1.ConditionFalse), condition("failed", metav1.ConditionTrue)},
			err:   ErrBindingFailed, looks: 1},
		{name: "never attached", timeout: 50 * time.Millisecond,
			first: []metav1.Condition{condition("attached", metav1.ConditionFalse)},
			err:   ErrBindingTimeout, looks: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, &Args{BindingTimeout: &metav1.Duration{Duration: tc.timeout}}, attachedGPU(t)...)
			pod := gpuPod("pod-a", "a")
			cs, node, statuses := schedule(t, c, pod, node1)
			if node != "node-1" {
				t.Fatalf("not placed: %v", statuses)
			}
			alloc := c.tracker.GetPendingAllocation("uid-a")
			if alloc == nil || len(alloc.Devices.Results[0].BindingConditions) == 0 {
				t.Fatalf("allocation %v carries no binding conditions", alloc)
			}
			// The driver reports first by PreBind's first look at the
			// claim (after PreBind wrote it), and later from its second on.
			var looks atomic.Int32
			watched := &watchedTracker{fakeTracker: c.tracker, beforeGet: func() {
				conds := tc.first
				if looks.Add(1) > 1 && tc.later != nil {
					conds = tc.later
				}
				written, err := c.tracker.Get("default", "a")
				at.Must(t, err)
				c.tracker.set(withDeviceConditions(written, alloc, conds...))
			}}
			c.pl.dra = &watchedDRA{fakeDRA: c.handle.dra, tracker: watched}
			c.pl.binder.dra = c.pl.dra
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st := c.pl.PreBind(ctx, cs, pod, node)
			if tc.err == nil {
				if !st.IsSuccess() {
					t.Fatalf("PreBind: %v", st)
				}
			} else if st.IsSuccess() || !errors.Is(st.AsError(), tc.err) {
				t.Fatalf("PreBind: %v, want %v", st, tc.err)
			}
			if n := looks.Load(); n < tc.looks {
				t.Errorf("PreBind read the claim %d times, want at least %d", n, tc.looks)
			}
			// The allocation was written before the wait, whatever its end:
			// the next attempt's PostFilter deallocates a failed one.
			got, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, "a", metav1.GetOptions{})
			at.Must(t, err)
			if got.Status.Allocation == nil || len(got.Status.ReservedFor) != 1 {
				t.Errorf("claim not written before waiting: %+v", got.Status)
			}
			select {
			case e := <-c.handle.recorder.Events:
				if !strings.Contains(e, "BindingConditionsPending") {
					t.Errorf("event %q, want BindingConditionsPending", e)
				}
			default:
				t.Error("no event while waiting for binding conditions")
			}
		})
	}
}

// watchedTracker is the cluster's claim tracker, calling beforeGet before
// every Get of a claim: what PreBind does each time it looks at the
// claims.
type watchedTracker struct {
	*fakeTracker
	beforeGet func()
}

func (w *watchedTracker) Get(namespace, name string) (*resourcev1.ResourceClaim, error) {
	w.beforeGet()
	return w.fakeTracker.Get(namespace, name)
}

type watchedDRA struct {
	*fakeDRA
	tracker *watchedTracker
}

func (d *watchedDRA) ResourceClaims() fwk.ResourceClaimTracker { return d.tracker }
