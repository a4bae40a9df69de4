package simulate

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/core/workload"
	"github.com/dractl/dractl/pkg/driver/mig"
)

// dgxCluster is n DGX H100 nodes (8 GPUs each, mixin form).
func dgxCluster(n int) *Cluster {
	c := &Cluster{}
	for _, cl := range examplegen.NVIDIAClasses() {
		c.Classes = append(c.Classes, cl.(*resourcev1.DeviceClass))
	}
	for i := range n {
		node := examplegen.DGXH100Node
		node.Node = fmt.Sprintf("dgx-%04d", i)
		c.Slices = append(c.Slices, node.Slices(examplegen.Mixins)...)
		c.Nodes = append(c.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Node, Labels: map[string]string{corev1.LabelHostname: node.Node}}})
	}
	return c
}

// migProfiles is the mix of the packing experiment: small profiles more
// often than large ones.
var migProfiles = []struct {
	name   string
	weight int32
}{{"1g.10gb", 6}, {"1g.20gb", 3}, {"2g.20gb", 3}, {"3g.40gb", 2}, {"4g.40gb", 1}, {"7g.80gb", 1}}

// migWorkload is a Workload over migProfiles, with its templates.
func migWorkload(seed int64, pods int32, interarrival, lifetime time.Duration) *decode.Set {
	set := &decode.Set{Sources: map[any]decode.Source{}}
	w := &workload.Workload{
		TypeMeta:   metav1.TypeMeta{APIVersion: workload.APIVersion, Kind: workload.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "mig", Namespace: "default"},
		Spec:       workload.Spec{Seed: seed, Pods: pods, MeanInterarrival: &metav1.Duration{Duration: interarrival}},
	}
	if lifetime > 0 {
		w.Spec.MeanLifetime = &metav1.Duration{Duration: lifetime}
	}
	for _, p := range migProfiles {
		name := mig.ProfileLabel(p.name)
		set.ClaimTemplates = append(set.ClaimTemplates, &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "mig",
				Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: "mig.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: fmt.Sprintf("device.attributes['gpu.nvidia.com'].profile == '%s'", p.name)}}},
				},
			}}}}},
		})
		w.Spec.Mix = append(w.Spec.Mix, workload.MixEntry{Name: name, Weight: p.weight, ResourceClaimTemplates: []string{name}})
	}
	set.Workloads = []*workload.Workload{w}
	return set
}

func mustStream(t testing.TB, set *decode.Set) *Stream {
	t.Helper()
	s, err := NewStream(set)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fixedShareIDs makes allocation results reproducible.
func fixedShareIDs() state.Options {
	return state.Options{NewShareID: func() types.UID { return "share" }}
}
