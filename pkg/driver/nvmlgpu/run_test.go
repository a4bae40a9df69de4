package nvmlgpu_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/internal/testing/fakeapi"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu"
)

// TestRunPublishesTheMockServer runs the driver as dractl-gpu-driver
// --backend=nvml --nvml-mock=dgxh200 does, against a fake API server, and
// checks that it publishes the DGX H200's pool: 8 counter sets and every
// device of the 8 GPUs.
func TestRunPublishesTheMockServer(t *testing.T) {
	short, err := os.MkdirTemp("", "nv")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	for _, d := range []string{"reg", "plugin"} {
		if err := os.MkdirAll(filepath.Join(short, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	client := fakeapi.NewClientset(fakeapi.Default, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- nvmlgpu.Run(ctx, nvmlgpu.Config{
			DriverName: driver, NodeName: node, StateDir: filepath.Join(short, "state"), CDIDir: filepath.Join(short, "cdi"),
			RegistrarDir: filepath.Join(short, "reg"), PluginDir: filepath.Join(short, "plugin"), Mock: "dgxh200",
		}, client)
	}()
	devices, sets := 0, 0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		devices, sets = 0, 0
		for _, s := range list.Items {
			devices += len(s.Spec.Devices)
			sets += len(s.Spec.SharedCounters)
		}
		if devices > 0 && len(list.Items) == int(list.Items[0].Spec.Pool.ResourceSliceCount) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("driver stopped: %v", err)
		default:
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The mock kernel driver's device nodes, where the CDI edits name them.
	dev := filepath.Join(nvmlgpu.MockDevRoot(filepath.Join(short, "state")), "dev")
	for name, num := range map[string][2]uint32{"nvidiactl": {195, 255}, "nvidia0": {195, 0}, "nvidia7": {195, 7}, "nvidia-caps/nvidia-cap3": {511, 3}} {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dev, name), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(num[0], num[1]) {
			t.Errorf("device node %s: %v (mode %o, rdev %d), want c %d %d", name, err, st.Mode, st.Rdev, num[0], num[1])
		}
	}
	// Every H200 of the mock: 7 placements of each 1g profile (1g.18gb,
	// 1g.18gb+me, 1g.35gb), 3 of 2g, 2 of 3g, 1 of 4g and 7g, and the whole
	// GPU.
	if want := 8 * (7 + 7 + 7 + 3 + 2 + 1 + 1 + 1); devices != want || sets != 8 {
		t.Fatalf("published %d devices and %d counter sets, want %d and 8", devices, sets, want)
	}
}
