package schedplugin

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
)

// A pod whose only node sees an invalid pool is not scheduled, and what
// the scheduler writes into the pod's status (the nodes' Filter statuses
// and PostFilter's summary) says which pool is invalid and why, as
// KEP-4815 "Validation" asks: through the informers, the State, Filter
// and PostFilter.
func TestInvalidPoolInPodStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		// slice breaks the pool.
		slice func(t *testing.T) runtime.Object
		want  string
	}{{
		name: "consumes a counter set nobody publishes",
		slice: func(t *testing.T) runtime.Object {
			v, err := api.ToUpstream(at.Slice("node-1-devices").Driver(driver).Pool("node-1").Node("node-1").Count(1).
				Device(at.Device("gpu-0").Consumes("gpu-0-counters", "memory", "40Gi")).Obj())
			at.Must(t, err)
			return v
		},
		want: `pool gpu.example.com/node-1 is invalid: ResourceSlice node-1-devices: spec.devices[0].consumesCounters[0].counterSet: Not found: "gpu-0-counters"`,
	}, {
		name: "served with spec.mixins, which this build cannot read",
		slice: func(t *testing.T) runtime.Object {
			v, err := api.ToUpstream(at.Slice("node-1-devices").Driver(driver).Pool("node-1").Node("node-1").Count(1).
				Device(at.Device("gpu-0")).Obj())
			at.Must(t, err)
			v.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "driver", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:devices":{},"f:driver":{},"f:mixins":{"f:device":{}}}}`)}}
			return v
		},
		want: "pool gpu.example.com/node-1 is invalid: ResourceSlice node-1-devices: spec.mixins: Forbidden: set on the API server but unknown to this build of dractl",
	}} {
		for _, mode := range []struct {
			name string
			args runtime.Object
		}{{"in-tree words", nil}, {"inline", inline}} {
			t.Run(tc.name+"/"+mode.name, func(t *testing.T) {
				s := tc.slice(t)
				s.(metav1.Object).SetUID(types.UID("uid-node-1-devices"))
				c := newCluster(t, mode.args, s, at.Class("gpu", `device.driver == "`+driver+`"`), gpuClaim("a", 1))
				pod := gpuPod("pod-a", "a")
				cs, node, statuses := schedule(t, c, pod, node1, node2)
				if node != "" {
					t.Fatalf("placed on %s from an invalid pool", node)
				}
				if len(statuses) != 2 {
					t.Fatalf("statuses %v, want one per node", statuses)
				}
				// Per node, the reason is short (the framework counts
				// nodes by it): the in-tree plugin's words, or dractl's
				// verdict. The pool and its problems are named by
				// PostFilter: in the Event, or in its message, which
				// the framework appends to the pod's condition.
				_, st := c.pl.PostFilter(context.Background(), cs, pod, nil)
				if mode.args == nil {
					if msg := statuses[0].Message(); msg != reasonInvalidPools {
						t.Errorf("node-1's Filter status %q, want %q", msg, reasonInvalidPools)
					}
					if st.Code() != fwk.Unschedulable || st.Message() != "" {
						t.Errorf("PostFilter: %v, want Unschedulable without a message, as in-tree", st)
					}
					select {
					case e := <-c.handle.recorder.Events:
						if !strings.HasPrefix(e, "Warning "+eventReason+" ") || !strings.Contains(e, tc.want) {
							t.Errorf("event %q\nwant it to contain %q", e, tc.want)
						}
					default:
						t.Errorf("no %s event", eventReason)
					}
					return
				}
				if msg := statuses[0].Message(); msg != "claim gpu: pools invalid" {
					t.Errorf("node-1's Filter status %q, want %q", msg, "claim gpu: pools invalid")
				}
				if st.Code() != fwk.Unschedulable || !strings.HasPrefix(st.Message(), "dractl: ") || !strings.Contains(st.Message(), tc.want) {
					t.Errorf("PostFilter: %v\nwant it to contain %q", st, tc.want)
				}
			})
		}
	}
}
