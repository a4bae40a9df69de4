package live

import (
	"path/filepath"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/decode"
)

// TestSnapshotKeepsTaintRules: a snapshot holds the cluster's
// DeviceTaintRules, which the offline verbs read back with -f DIR and
// apply as the scheduler does.
func TestSnapshotKeepsTaintRules(t *testing.T) {
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-0-ecc", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.example.com"), Device: ptr.To("gpu-0")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/unhealthy", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
	dir := t.TempDir()
	files, err := (&Objects{TaintRules: []*resourcev1.DeviceTaintRule{rule}}).Snapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != filepath.Join(dir, "devicetaintrules.yaml") || files[0].Objects != 1 {
		t.Fatalf("files %+v, want devicetaintrules.yaml with one object", files)
	}
	objs, err := decode.Paths([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := decode.Group(objs)
	if len(set.TaintRules) != 1 {
		t.Fatalf("%d DeviceTaintRules read back, want 1", len(set.TaintRules))
	}
	if got := set.TaintRules[0]; got.Name != rule.Name || len(got.ManagedFields) != 0 || !apiequality.Semantic.DeepEqual(got.Spec, rule.Spec) {
		t.Errorf("read back %+v, want %+v without managedFields", got, rule)
	}
}
