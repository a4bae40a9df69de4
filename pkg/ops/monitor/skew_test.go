package monitor

import (
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/pkg/ops/live"
)

// A slice whose managedFields record spec.mixins, which these types
// cannot hold, makes its pool invalid through the informer's transform:
// a PoolInvalid Event on the slice that names the field, at once.
func TestSkewedSliceReportedAsInvalidPool(t *testing.T) {
	m, _, rec := newTestMonitor(t, time.Hour)
	s := slice("devices", 1, false)
	s.Spec.Devices[0].ConsumesCounters = nil
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "driver", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:devices":{},"f:mixins":{}}}`)}}
	obj, err := trim(live.NewSharer())(s)
	if err != nil {
		t.Fatal(err)
	}
	m.setSlice(obj.(*resourcev1.ResourceSlice))
	m.sync()
	e := next(rec)
	if !strings.HasPrefix(e, "Warning PoolInvalid pool gpu.example.com/node-1 is invalid") || !strings.Contains(e, "spec.mixins: Forbidden") {
		t.Fatalf("event %q, want PoolInvalid naming spec.mixins", e)
	}
}
