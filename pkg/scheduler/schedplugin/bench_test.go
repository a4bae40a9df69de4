package schedplugin

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
)

// BenchmarkSchedulingCycle measures what the plugin costs kube-scheduler
// per pod on DGX H100 nodes (152 MIG and GPU devices each) with every
// pod asking for one 1g.10gb device: PreFilter, Filter on every node (as
// the framework does up to 100 nodes), Reserve on the first fit, and the
// informer's update after binding. It runs the real plugin against a fake
// framework; the e2e race measures the whole scheduler.
func BenchmarkSchedulingCycle(b *testing.B) {
	for _, nodes := range []int{10, 100} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			var objs []runtime.Object
			var infos []fakeNodeInfo
			for n := range nodes {
				node := examplegen.DGXH100Node
				node.Node = at.Name("node", n)
				for _, s := range node.Slices(examplegen.Flat) {
					v, err := api.ToUpstream(s)
					if err != nil {
						b.Fatal(err)
					}
					v.UID = types.UID(v.Name)
					objs = append(objs, v)
				}
				infos = append(infos, fakeNodeInfo{node: at.Node(node.Node)})
			}
			for _, c := range examplegen.NVIDIAClasses() {
				objs = append(objs, c.(*resourcev1.DeviceClass))
			}
			// One pod per 1g.10gb placement: 56 per node.
			pods := 56 * nodes
			var claims []*resourcev1.ResourceClaim
			for i := range pods {
				c := at.Claim(at.Name("claim", i)).Request(at.Request("mig", "mig.nvidia.com").
					Selector(`device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`)).Obj()
				c.ResourceVersion = "1"
				claims = append(claims, c)
				objs = append(objs, c)
			}
			c := newCluster(b, nil, objs...)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				if i%pods == 0 && i > 0 {
					b.StopTimer()
					// Start over: every claim deallocated.
					for _, cl := range claims {
						c.tracker.set(cl)
						c.pl.feed.setClaim(cl)
					}
					b.StartTimer()
				}
				claim := claims[i%pods]
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: at.Name("pod", i), Namespace: "default", UID: types.UID(at.Name("pod", i))}, Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "mig", ResourceClaimName: &claim.Name}}}}
				cs := newCycleState()
				if _, st := c.pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
					b.Fatal(st)
				}
				placed := ""
				for _, n := range infos[:min(len(infos), 100)] {
					if c.pl.Filter(ctx, cs, pod, n).IsSuccess() && placed == "" {
						placed = n.node.Name
					}
				}
				if placed == "" {
					b.Fatalf("pod %d not placed", i)
				}
				if st := c.pl.Reserve(ctx, cs, pod, placed); !st.IsSuccess() {
					b.Fatal(st)
				}
				// PreBind's API write, without the API, and the informer
				// delivering it.
				written := claim.DeepCopy()
				written.Status.Allocation = c.tracker.GetPendingAllocation(claim.UID)
				c.tracker.set(written)
				c.tracker.MaybeRemoveClaimPendingAllocation(claim.UID, true)
				c.pl.feed.setClaim(written)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/pod")
		})
	}
}
