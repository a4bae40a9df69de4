package publish_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/driver/publish"
)

const tpuDriver = "tpu.google.com"

// tpuPool is KEP-4815's multi-host TPU block of examples/tpu-multihost:
// one pool, perDeviceNodeSelection, devices spanning hosts.
func tpuPool(t testing.TB) []*api.ResourceSlice {
	t.Helper()
	objs, err := decode.Paths([]string{"../../../examples/tpu-multihost/resourceslices.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*api.ResourceSlice
	for _, o := range objs {
		if s, ok := o.Obj.(*api.ResourceSlice); ok {
			out = append(out, s)
		}
	}
	if len(out) != 2 {
		t.Fatalf("%d slices in the example", len(out))
	}
	return out
}

// TestBuildCentral: the control plane publishes pools no node owns with
// Build's validation and flattening, and refuses a node's devices or a
// pool that does not say which nodes see it.
func TestBuildCentral(t *testing.T) {
	p, err := publish.BuildCentral(tpuDriver, tpuPool(t))
	if err != nil {
		t.Fatal(err)
	}
	pool, ok := p.Resources.Pools["tpu-pool"]
	if !ok || len(pool.Slices) != 2 || pool.NodeSelector != nil || pool.AllNodes {
		t.Fatalf("published %+v", p.Resources)
	}
	for _, s := range pool.Slices {
		if s.PerDeviceNodeSelection == nil || !*s.PerDeviceNodeSelection {
			t.Errorf("slice without perDeviceNodeSelection: %+v", s)
		}
	}
	if d := pool.Slices[1].Devices[0]; d.NodeName == nil || *d.NodeName != "node-1" {
		t.Errorf("first device %+v, want tpu-2x2-1 on node-1", d)
	}

	allNodes := func() []*api.ResourceSlice {
		return []*api.ResourceSlice{
			{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: api.ResourceSliceSpec{Pool: api.ResourcePool{Name: "net"}, AllNodes: new(true),
				Devices: []api.Device{{Name: "nic-0"}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: api.ResourceSliceSpec{Pool: api.ResourcePool{Name: "net"}, AllNodes: new(true),
				Devices: []api.Device{{Name: "nic-1"}}}},
		}
	}
	p, err = publish.BuildCentral(tpuDriver, allNodes())
	if err != nil {
		t.Fatal(err)
	}
	if net := p.Resources.Pools["net"]; !net.AllNodes || len(net.Slices) != 2 {
		t.Fatalf("allNodes pool published as %+v", net)
	}

	for _, tc := range []struct {
		name   string
		break_ func([]*api.ResourceSlice)
		want   string
	}{
		{"a node's devices", func(ss []*api.ResourceSlice) { ss[0].Spec.AllNodes, ss[0].Spec.NodeName = nil, new("node-1") },
			"slice 0 (a): spec.nodeName: Forbidden: a node's devices are published by its kubelet plugin"},
		{"no placement", func(ss []*api.ResourceSlice) { ss[1].Spec.AllNodes = nil },
			"slice 1 (b): spec: Required value: one of nodeSelector, allNodes or perDeviceNodeSelection"},
		{"no pool name", func(ss []*api.ResourceSlice) { ss[0].Spec.Pool.Name = "" },
			"slice 0 (a): spec.pool.name: Required value"},
		{"slices of a pool seen by different nodes", func(ss []*api.ResourceSlice) {
			ss[1].Spec.AllNodes = nil
			ss[1].Spec.NodeSelector = tpuPool(t)[1].Spec.Devices[5].NodeSelector
		}, "pool net: slices a and b: spec.nodeSelector and spec.allNodes differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := allNodes()
			tc.break_(ss)
			_, err := publish.BuildCentral(tpuDriver, ss)
			var invalid *publish.InvalidPoolError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want an InvalidPoolError with %q", err, tc.want)
			}
		})
	}
}

func driverSlices(t testing.TB, c kubernetes.Interface) []resourcev1.ResourceSlice {
	t.Helper()
	l, err := c.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestControllerLeaderElection: of two replicas one publishes; when the
// leader stops, the other takes over and publishes what it is given. (The
// fake clientset ignores field selectors, so that nodes' slices are left
// alone is shown by the e2e test, against kube-apiserver.)
func TestControllerLeaderElection(t *testing.T) {
	client := fake.NewClientset()
	// The fake does not generate names; the ResourceSlice controller
	// creates with generateName.
	var created atomic.Int32
	client.PrependReactor("create", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if s := action.(k8stesting.CreateAction).GetObject().(*resourcev1.ResourceSlice); s.Name == "" {
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, created.Add(1))
		}
		return false, nil, nil
	})
	le := publish.LeaderElection{Namespace: "kube-system", LeaseDuration: 5 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 50 * time.Millisecond}

	start := func(identity string) (*publish.Controller, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		le := le
		le.Identity = identity
		c, err := publish.StartController(ctx, publish.ControllerOptions{DriverName: tpuDriver, KubeClient: client, LeaderElection: le, SyncDelay: 50 * time.Millisecond, Server: fakeClientServer}, tpuPool(t))
		if err != nil {
			t.Fatal(err)
		}
		return c, cancel
	}
	a, stopA := start("a")
	<-a.Leading()
	b, stopB := start("b")
	defer func() { stopB(); b.Wait() }()

	pools := func() []string {
		var out []string
		for _, s := range driverSlices(t, client) {
			out = append(out, s.Spec.Pool.Name)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("waiting for %s: %v; pools %v", what, err, pools())
		}
	}
	waitFor("the TPU pool", func() bool { return slices.Equal(pools(), []string{"tpu-pool"}) })
	select {
	case <-b.Leading():
		t.Fatal("both replicas lead")
	default:
	}

	// b publishes another pool once it leads.
	if err := b.Publish([]*api.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "net"}, Spec: api.ResourceSliceSpec{
		Pool: api.ResourcePool{Name: "net"}, AllNodes: new(true), Devices: []api.Device{{Name: "nic-0"}}}}}); err != nil {
		t.Fatal(err)
	}
	stopA()
	a.Wait()
	<-b.Leading()
	waitFor("the new pool, and the TPU pool gone", func() bool { return slices.Equal(pools(), []string{"net"}) })

	if err := b.Publish([]*api.ResourceSlice{{Spec: api.ResourceSliceSpec{Pool: api.ResourcePool{Name: "x"}, NodeName: new("node-1")}}}); err == nil {
		t.Fatal("a node's slice published from the control plane")
	}
	if _, ok := b.Published().Resources.Pools["net"]; !ok {
		t.Fatal("a refused description replaced the published one")
	}
}
