package driverkit_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	healthpb "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"

	"github.com/dractl/dractl/pkg/driver/publish"
)

// TestHealthAsKubelet watches device health over the driver's socket with
// the kubelet's generated DRAResourceHealth client: every published device
// is reported healthy, and once the profile marks a GPU unhealthy, every
// device of that GPU is reported unhealthy with the profile's message
// while the other GPU's devices stay healthy.
func TestHealthAsKubelet(t *testing.T) {
	e := newEnv(t)
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, plugin := serveOverSockets(ctx, t, e, client, 20*time.Millisecond)

	conn, err := grpc.NewClient("unix://"+filepath.Join(plugin, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := healthpb.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &healthpb.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	flat, err := publish.Build(driver, node, e.GPUs.Pool())
	if err != nil {
		t.Fatal(err)
	}
	published := map[string]bool{}
	for _, s := range flat.Slices {
		for _, dev := range s.Spec.Devices {
			published[dev.Name] = true
		}
	}
	// recv returns the next report as device name → health, message.
	type health struct {
		status  healthpb.HealthStatus
		message string
	}
	recv := func() map[string]health {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]health{}
		for _, dh := range resp.Devices {
			if dh.Device.PoolName != node {
				t.Fatalf("device %s reported in pool %q, want %q", dh.Device.DeviceName, dh.Device.PoolName, node)
			}
			out[dh.Device.DeviceName] = health{dh.Health, dh.Message}
		}
		return out
	}

	first := recv()
	if len(first) != len(published) {
		t.Fatalf("first report names %d devices, %d are published", len(first), len(published))
	}
	for name, h := range first {
		if !published[name] || h.status != healthpb.HealthStatus_HEALTHY {
			t.Fatalf("first report: %s %v (published %v), want every published device healthy", name, h.status, published[name])
		}
	}

	if err := os.MkdirAll(filepath.Join(e.GPUs.Dir, "unhealthy"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed into place: the driver polls, and a poll
	// between os.WriteFile's create and its write would read an empty
	// reason.
	fault := filepath.Join(e.GPUs.Dir, "unhealthy", "0")
	if err := os.WriteFile(fault+".tmp", []byte("XID 79: fallen off the bus\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fault+".tmp", fault); err != nil {
		t.Fatal(err)
	}
	sick, well := migDev(0, "1g.5gb", 0), migDev(1, "1g.5gb", 0)
	for {
		got := recv()
		if got[sick].status != healthpb.HealthStatus_UNHEALTHY {
			continue // a report taken before the file was written
		}
		if got[sick].message != "XID 79: fallen off the bus" {
			t.Errorf("%s: message %q", sick, got[sick].message)
		}
		if got[well].status != healthpb.HealthStatus_HEALTHY {
			t.Errorf("%s on the healthy GPU reported %v", well, got[well].status)
		}
		if len(got) != len(published) {
			t.Errorf("report names %d devices, %d are published", len(got), len(published))
		}
		return
	}
}
