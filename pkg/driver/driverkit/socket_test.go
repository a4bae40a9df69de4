package driverkit_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// TestAsKubelet talks to a running driver the way the kubelet does, over
// its unix sockets with the kubelet's generated gRPC clients: registration
// (GetInfo, NotifyRegistrationStatus), then NodePrepareResources and
// NodeUnprepareResources v1. The claims come from a fake clientset, the
// helper's claim lookup; publishing goes to it too.
func TestAsKubelet(t *testing.T) {
	e := newEnv(t)
	a := claim("a", migDev(0, "1g.5gb", 0))
	b := claim("b", migDev(0, "1g.10gb", 0)) // overlaps a's memory slice
	client := fake.NewClientset([]runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}}, a, b}...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg, plugin := serveOverSockets(ctx, t, e, client, 0)

	dial := func(path string) *grpc.ClientConn {
		conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	registration := registerapi.NewRegistrationClient(dial(filepath.Join(reg, driver+"-reg.sock")))
	info, err := registration.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != driver || info.Endpoint != filepath.Join(plugin, "dra.sock") ||
		!slices.Contains(info.SupportedVersions, drapbv1.DRAPluginService) {
		t.Fatalf("GetInfo: %+v", info)
	}
	if _, err := registration.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}

	dra := drapbv1.NewDRAPluginClient(dial(info.Endpoint))
	req := func(cs ...*metav1.ObjectMeta) []*drapbv1.Claim {
		var out []*drapbv1.Claim
		for _, c := range cs {
			out = append(out, &drapbv1.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)})
		}
		return out
	}
	prep, err := dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: req(&a.ObjectMeta)})
	if err != nil {
		t.Fatal(err)
	}
	got := prep.Claims[string(a.UID)]
	wantID := driver + "/gpu=uid-a-" + migDev(0, "1g.5gb", 0)
	if got.Error != "" || len(got.Devices) != 1 || got.Devices[0].DeviceName != migDev(0, "1g.5gb", 0) ||
		!slices.Equal(got.Devices[0].CdiDeviceIds, []string{wantID}) || !slices.Equal(got.Devices[0].RequestNames, []string{"r0"}) {
		t.Fatalf("prepare a: %+v", got)
	}
	if p := e.Partitions(); len(p) != 1 {
		t.Fatalf("partitions %v", p)
	}

	// The kubelet repeats a prepare after its own restart: same answer.
	again, err := dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: req(&a.ObjectMeta)})
	if err != nil || again.Claims[string(a.UID)].String() != got.String() {
		t.Fatalf("second prepare: %v, %v", again, err)
	}

	// A claim overlapping a's partition gets a per-claim error.
	prepB, err := dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: req(&b.ObjectMeta)})
	if err != nil {
		t.Fatal(err)
	}
	if msg := prepB.Claims[string(b.UID)].Error; msg == "" || !strings.Contains(msg, "held by claim uid-a") {
		t.Fatalf("prepare b: %q, want a conflict with claim a", msg)
	}

	for range 2 {
		un, err := dra.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: req(&a.ObjectMeta)})
		if err != nil || un.Claims[string(a.UID)].Error != "" {
			t.Fatalf("unprepare a: %v, %v", un, err)
		}
	}
	if p, s := e.Partitions(), e.Specs(); len(p)+len(s) != 0 {
		t.Fatalf("left behind: %v %v", p, s)
	}
	prepB, err = dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: req(&b.ObjectMeta)})
	if err != nil || prepB.Claims[string(b.UID)].Error != "" {
		t.Fatalf("prepare b after a left: %v, %v", prepB, err)
	}
}

// serveOverSockets starts the driver of e over unix sockets as the kubelet
// would find them, and returns the registration directory and the
// driver's plugin directory. The driver stops with the test.
func serveOverSockets(ctx context.Context, t *testing.T, e *env, client *fake.Clientset, healthInterval time.Duration) (reg, plugin string) {
	t.Helper()
	_, reg, plugin = startDriver(ctx, t, e, client, func(o *driverkit.Options) { o.HealthInterval = healthInterval })
	return reg, plugin
}

// startDriver is serveOverSockets with options changed by with, and the
// driver.
func startDriver(ctx context.Context, t *testing.T, e *env, client *fake.Clientset, with func(*driverkit.Options)) (d *driverkit.Driver, reg, plugin string) {
	t.Helper()
	// Short directories: unix socket paths are limited to 107 bytes.
	sockets, err := os.MkdirTemp("", "dk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockets) })
	// The kubelet creates the registration directory; the driver's own
	// directory beneath plugins/ is the driver's to create.
	reg, plugin = filepath.Join(sockets, "reg"), filepath.Join(sockets, "plugins", driver)
	if err := os.Mkdir(reg, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := driverkit.Options{
		Config:   prepare.Config{DriverName: driver, Profile: e.GPUs, StateDir: e.Dir, CDIDir: filepath.Join(e.Dir, "cdi"), CDIClass: "gpu"},
		NodeName: node, KubeClient: client, RegistrarDir: reg, PluginDir: plugin,
		Server: drivertest.FakeServer,
	}
	if with != nil {
		with(&opts)
	}
	d, err = driverkit.Start(ctx, opts, e.GPUs.Pool())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	return d, reg, plugin
}
