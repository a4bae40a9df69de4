package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
)

// TestDriverWritesOnlyItsNodesSlices installs the GPU driver's RBAC and
// the chart's admission policy (deploy/driver) and checks, against
// kube-apiserver, what the driver's ServiceAccount may do with
// ResourceSlices: with the token of its pod on node-a it creates, updates
// and deletes node-a's slices and no others (node-b's, a slice of no
// node), even though its ClusterRole allows them all; with a token bound
// to no pod it writes no slice. An administrator is not restricted.
func TestDriverWritesOnlyItsNodesSlices(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	createNodes(t, cp, "node-a", "node-b")
	const ns, account = "dractl-gpu-driver", "dractl-gpu-driver"
	clientset := func(cfg *rest.Config) kubernetes.Interface {
		t.Helper()
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	onA := clientset(cp.ServiceAccountOnNode(t, ns, account, "node-a"))
	onB := clientset(cp.ServiceAccountOnNode(t, ns, account, "node-b"))
	unbound := clientset(cp.ServiceAccount(t, ns, account))
	cp.Apply(t, driverRBAC, slicePolicy)
	ctx := cp.Context()
	admin := cp.Client.ResourceV1().ResourceSlices()

	slice := func(name string, node *string) *resourcev1.ResourceSlice {
		s := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: gpuDriver, Pool: resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "gpu-0"}}},
		}
		if node != nil {
			s.Spec.NodeName = node
		} else {
			s.Spec.AllNodes = ptr.To(true)
		}
		return s
	}
	refusedBy := func(err error, want string) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "dractl-gpu-driver-node-slices") && strings.Contains(err.Error(), want)
	}
	const otherNode = "dractl-gpu-driver on node node-a may write only that node's ResourceSlices, not ResourceSlice "
	const noNode = "this request's token names none"

	// kube-apiserver compiles a policy some time after it is created;
	// until then it admits everything. A dry run shows when it acts.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = onA.ResourceV1().ResourceSlices().Create(ctx, slice("probe", ptr.To("node-b")), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refusedBy(last, otherNode+"probe of node node-b"), nil
	}); err != nil {
		t.Fatalf("the policy never refused node-a's driver a slice of node-b (last answer: %v): %v", last, err)
	}

	// The administrator publishes a slice on each node and one for all
	// nodes: the policy is the driver's alone.
	for _, s := range []*resourcev1.ResourceSlice{slice("admin-a", ptr.To("node-a")), slice("admin-b", ptr.To("node-b")), slice("admin-all", nil)} {
		if _, err := admin.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the administrator creating %s: %v", s.Name, err)
		}
	}
	get := func(name string) *resourcev1.ResourceSlice {
		t.Helper()
		s, err := admin.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	bump := func(name string) *resourcev1.ResourceSlice {
		s := get(name)
		s.Spec.Pool.Generation++
		return s
	}

	for _, tc := range []struct {
		name   string
		client kubernetes.Interface
		write  func(ctx context.Context, c kubernetes.Interface) error
		// refused is what the refusal says; "" when allowed.
		refused string
	}{
		{"node-a's driver creates a slice of node-a", onA, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.ResourceV1().ResourceSlices().Create(ctx, slice("a-1", ptr.To("node-a")), metav1.CreateOptions{})
			return err
		}, ""},
		{"node-a's driver updates it", onA, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.ResourceV1().ResourceSlices().Update(ctx, bump("a-1"), metav1.UpdateOptions{})
			return err
		}, ""},
		{"node-a's driver updates the administrator's slice of node-a", onA, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.ResourceV1().ResourceSlices().Update(ctx, bump("admin-a"), metav1.UpdateOptions{})
			return err
		}, ""},
		{"node-a's driver deletes its slice", onA, func(ctx context.Context, c kubernetes.Interface) error {
			return c.ResourceV1().ResourceSlices().Delete(ctx, "a-1", metav1.DeleteOptions{})
		}, ""},
		{"node-a's driver creates a slice of node-b", onA, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.ResourceV1().ResourceSlices().Create(ctx, slice("b-1", ptr.To("node-b")), metav1.CreateOptions{})
			return err
		}, otherNode + "b-1 of node node-b"},
		{"node-a's driver updates a slice of node-b", onA, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.ResourceV1().ResourceSlices().Update(ctx, bump("admin-b"), metav1.UpdateOptions{})
			return err
		}, otherNode + "admin-b of node node-b"},
		// A DELETE carries no object: the policy reads the stored one.
		{"node-a's driver deletes a slice of node-b", onA, func(ctx context.Context, c kubernetes.Interface) error {
			return c.ResourceV1().ResourceSlices().Delete(ctx, "admin-b", metav1.DeleteOptions{})
		}, otherNode + "admin-b of node node-b"},
		{"node-a's driver creates a slice of no node", onA, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.ResourceV1().ResourceSlices().Create(ctx, slice("all-1", nil), metav1.CreateOptions{})
			return err
		}, otherNode + "all-1 of no node"},
		{"node-a's driver deletes a slice of no node", onA, func(ctx context.Context, c kubernetes.Interface) error {
			return c.ResourceV1().ResourceSlices().Delete(ctx, "admin-all", metav1.DeleteOptions{})
		}, otherNode + "admin-all of no node"},
		{"node-b's driver updates node-b's slice", onB, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.ResourceV1().ResourceSlices().Update(ctx, bump("admin-b"), metav1.UpdateOptions{})
			return err
		}, ""},
		{"an unbound token creates a slice of node-a", unbound, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.ResourceV1().ResourceSlices().Create(ctx, slice("a-2", ptr.To("node-a")), metav1.CreateOptions{})
			return err
		}, noNode},
		{"an unbound token updates a slice of node-a", unbound, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.ResourceV1().ResourceSlices().Update(ctx, bump("admin-a"), metav1.UpdateOptions{})
			return err
		}, noNode},
		{"an unbound token deletes a slice of node-a", unbound, func(ctx context.Context, c kubernetes.Interface) error {
			return c.ResourceV1().ResourceSlices().Delete(ctx, "admin-a", metav1.DeleteOptions{})
		}, noNode},
	} {
		err := tc.write(ctx, tc.client)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.refused != "" && !refusedBy(err, tc.refused):
			t.Errorf("%s: got %v, want a refusal by the policy saying %q", tc.name, err, tc.refused)
		}
	}

	// What was refused did not happen; the administrator's slices are
	// still there, and only node-b's driver's update changed node-b's.
	for name, gen := range map[string]int64{"admin-a": 2, "admin-b": 2, "admin-all": 1} {
		if got := get(name).Spec.Pool.Generation; got != gen {
			t.Errorf("%s: generation %d, want %d", name, got, gen)
		}
	}
	for _, name := range []string{"a-1", "a-2", "b-1", "all-1"} {
		if _, err := admin.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: %v, want it absent", name, err)
		}
	}
}
