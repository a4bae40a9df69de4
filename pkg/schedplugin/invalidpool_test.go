package schedplugin

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	at "github.com/dractl/dractl/pkg/allocator/allocatortest"
	"github.com/dractl/dractl/pkg/api"
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
			v, err := api.ToV1(at.Slice("node-1-devices").Driver(driver).Pool("node-1").Node("node-1").Count(1).
				Device(at.Device("gpu-0").Consumes("gpu-0-counters", "memory", "40Gi")).Obj())
			must(t, err)
			return v
		},
		want: `pool gpu.example.com/node-1 is invalid: ResourceSlice node-1-devices: spec.devices[0].consumesCounters[0].counterSet: Not found: "gpu-0-counters"`,
	}, {
		name: "served with spec.mixins, which this build cannot read",
		slice: func(t *testing.T) runtime.Object {
			v, err := api.ToV1(at.Slice("node-1-devices").Driver(driver).Pool("node-1").Node("node-1").Count(1).
				Device(at.Device("gpu-0")).Obj())
			must(t, err)
			v.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "driver", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:devices":{},"f:driver":{},"f:mixins":{"f:device":{}}}}`)}}}
			return v
		},
		want: "pool gpu.example.com/node-1 is invalid: ResourceSlice node-1-devices: spec.mixins: Forbidden: set on the API server but unknown to this build of dractl",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.slice(t)
			s.(metav1.Object).SetUID(types.UID("uid-node-1-devices"))
			c := newCluster(t, nil, s, at.Class("gpu", `device.driver == "`+driver+`"`), gpuClaim("a", 1))
			pod := gpuPod("pod-a", "a")
			cs, node, statuses := schedule(t, c, pod, node1, node2)
			if node != "" {
				t.Fatalf("placed on %s from an invalid pool", node)
			}
			if len(statuses) != 2 {
				t.Fatalf("statuses %v, want one per node", statuses)
			}
			// Per node, the reason is short (the framework counts nodes by
			// it); PostFilter's message, which the framework appends to
			// the pod's condition, names the pool and its problems.
			if msg := statuses[0].Message(); msg != "claim gpu: pools invalid" {
				t.Errorf("node-1's Filter status %q, want %q", msg, "claim gpu: pools invalid")
			}
			_, st := c.pl.PostFilter(context.Background(), cs, pod, nil)
			if st.Code() != fwk.Unschedulable || !strings.HasPrefix(st.Message(), "dractl: ") || !strings.Contains(st.Message(), tc.want) {
				t.Errorf("PostFilter: %v\nwant it to contain %q", st, tc.want)
			}
		})
	}
}
