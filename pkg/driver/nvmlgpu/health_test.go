package nvmlgpu_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dractl/dractl/internal/testing/fakeapi"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu/nvmlmock"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// TestXIDBecomesTaints runs the kit's driver on the NVML profile of a mock
// DGX A100 and feeds XID errors through go-nvml's mock event sets: XID 79
// (fallen off the bus) on GPU 2 taints its every device NoSchedule in the
// published slices; XID 13 (an application's fault) on GPU 1 leaves it
// schedulable with an informational None taint, which goes once it is
// older than NoticeLifetime.
func TestXIDBecomesTaints(t *testing.T) {
	srv, err := nvmlmock.New("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := srv.WriteMigMinors(filepath.Join(dir, "mig-minors")); err != nil {
		t.Fatal(err)
	}
	clock := testingclock.NewFakePassiveClock(time.Now())
	gpus, err := nvmlgpu.New(srv, nvmlgpu.Options{Driver: driver, Node: node, StateDir: filepath.Join(dir, "state"),
		MigMinors: filepath.Join(dir, "mig-minors"), Clock: clock}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	client := fakeapi.NewClientset(fakeapi.Default, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	defer client.Close()
	var n atomic.Int64
	client.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := action.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && obj.GetName() == "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), n.Add(1)))
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sockets, err := os.MkdirTemp("", "nv")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockets)
	if err := os.Mkdir(filepath.Join(sockets, "reg"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := driverkit.Start(ctx, driverkit.Options{
		Config:   prepare.Config{DriverName: driver, Profile: gpus, StateDir: filepath.Join(dir, "state"), CDIDir: filepath.Join(dir, "cdi"), CDIClass: "gpu"},
		NodeName: node, KubeClient: client, RegistrarDir: filepath.Join(sockets, "reg"), PluginDir: filepath.Join(sockets, "plugin"),
		HealthInterval: 20 * time.Millisecond, HealthTaints: driverkit.HealthTaints{Notices: true},
	}, gpus.Pool())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	watched := make(chan error, 1)
	go func() { watched <- gpus.WatchHealth(ctx) }()
	defer func() {
		cancel()
		if err := <-watched; err != nil {
			t.Error(err)
		}
	}()

	// taints maps each published device's GPU prefix to its taints.
	taints := func(ctx context.Context) (map[string]map[string]int, error) {
		l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]map[string]int{}
		for _, s := range l.Items {
			for _, dev := range s.Spec.Devices {
				gpu, _, _ := strings.Cut(strings.TrimPrefix(dev.Name, "gpu-"), "-")
				for _, tt := range dev.Taints {
					if out[gpu] == nil {
						out[gpu] = map[string]int{}
					}
					out[gpu][fmt.Sprintf("%s=%s:%s", tt.Key, tt.Value, tt.Effect)]++
				}
			}
		}
		return out, nil
	}
	perGPU := mig.A100.DevicesPerGPU()
	var last map[string]map[string]int
	// The watcher registers its event sets before it waits; until then an
	// injected error has nowhere to go, so inject until the taints show.
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if len(d.Taints()) == 0 {
			if err := srv.InjectXID(1, 13); err != nil {
				return false, err
			}
			if err := srv.InjectXID(2, 79); err != nil {
				return false, err
			}
		}
		got, err := taints(ctx)
		last = got
		return err == nil && len(got) == 2 &&
			got["2"]["dractl.dev/unhealthy=XID-79:NoSchedule"] == perGPU &&
			got["1"]["dractl.dev/health-event=XID-13:None"] == perGPU, err
	})
	if err != nil {
		t.Fatalf("waiting for GPU 2 tainted unhealthy and GPU 1 with a notice: %v; published %v", err, last)
	}

	clock.SetTime(clock.Now().Add(nvmlgpu.NoticeLifetime))
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := taints(ctx)
		last = got
		return err == nil && len(got) == 1 && got["2"]["dractl.dev/unhealthy=XID-79:NoSchedule"] == perGPU, err
	})
	if err != nil {
		t.Fatalf("waiting for GPU 1's notice to expire, GPU 2 still unhealthy: %v; published %v", err, last)
	}
}
