package allocator

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
)

// A node judges a pool by the slices it sees, as upstream's allocator
// does (KEP-4815 §"Validation moved from admission to runtime"); validate
// still reports the whole pool.
func TestPoolAsTheNodeSeesIt(t *testing.T) {
	gen := func(name, node string, g int64, devs ...string) *api.ResourceSlice {
		b := at.Slice(name).Node(node).Generation(g).Count(2)
		for _, d := range devs {
			b.Device(at.Device(d))
		}
		return b.Obj()
	}
	node2 := at.Node("node-2")
	cases := []struct {
		name   string
		slices []*api.ResourceSlice
		node   *corev1.Node
		want   []string // nil: unfit
	}{
		{
			name: "a duplicate name in a slice the node does not see does not matter",
			slices: []*api.ResourceSlice{
				at.Slice("a").AllNodes().Count(3).Device(at.Device("shared")).Obj(),
				at.Slice("b").Node("node-1").Count(3).Device(at.Device("x")).Obj(),
				at.Slice("c").Node("node-2").Count(3).Device(at.Device("x")).Obj(),
			},
			want: []string{"r=pool/shared"},
		},
		{
			name: "a duplicate name among the slices the node sees makes the pool invalid",
			slices: []*api.ResourceSlice{
				at.Slice("a").Node("node-1").Count(2).Device(at.Device("x")).Obj(),
				at.Slice("b").Node("node-1").Count(2).Device(at.Device("x")).Obj(),
			},
		},
		{
			name: "a node that sees a complete older generation allocates from it",
			slices: []*api.ResourceSlice{
				gen("a1", "node-1", 1, "d1"), gen("b1", "node-1", 1, "d2"),
				gen("a2", "node-2", 2, "d1"), gen("b2", "node-2", 2, "d2"),
			},
			want: []string{"r=pool/d1"},
		},
		{
			name: "the node of the newer generation allocates from that",
			slices: []*api.ResourceSlice{
				gen("a1", "node-1", 1, "d1"), gen("b1", "node-1", 1, "d2"),
				gen("a2", "node-2", 2, "e1"), gen("b2", "node-2", 2, "e2"),
			},
			node: node2,
			want: []string{"r=pool/e1"},
		},
		{
			name: "an incomplete view with a newer generation elsewhere is obsolete",
			slices: []*api.ResourceSlice{
				gen("a1", "node-1", 1, "d1"),
				gen("a2", "node-2", 2, "d1"), gen("b2", "node-2", 2, "d2"),
			},
		},
		{
			name: "an incomplete view of the newest generation is complete when all its slices exist",
			slices: []*api.ResourceSlice{
				gen("a1", "node-1", 2, "d1"), gen("b1", "node-2", 2, "d2"),
			},
			want: []string{"r=pool/d1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node
			if node == nil {
				node = node1
			}
			e := &env{slices: tc.slices, classes: []*resourcev1.DeviceClass{anyClass}}
			res, err := e.run(t, node, at.Claim("c").Request(at.Request("r", "any")).Obj())
			switch {
			case tc.want == nil && !IsUnfit(err):
				t.Fatalf("want unfit, got %v %v", res, err)
			case tc.want == nil:
			case err != nil:
				t.Fatal(err)
			case !slices.Equal(devices(res[0]), tc.want):
				t.Errorf("got %v, want %v", devices(res[0]), tc.want)
			}
		})
	}
}
