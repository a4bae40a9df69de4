package driverkit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/mig"
)

// mark writes the mock GPUs' file dir/sub/name with content, aside and
// renamed into place: the driver polls, and a poll between a create and
// its write would read an empty reason.
func mark(t *testing.T, e *env, sub, name, content string) {
	t.Helper()
	dir := filepath.Join(e.GPUs.Dir, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path+".tmp", []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// publishedTaints lists the taints of every device in the fake API
// server's slices of the driver, as key=value:Effect strings by device.
func publishedTaints(ctx context.Context, client *fake.Clientset) (map[string][]string, int, error) {
	l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	out, devices := map[string][]string{}, 0
	for _, s := range l.Items {
		for _, d := range s.Spec.Devices {
			devices++
			for _, t := range d.Taints {
				out[d.Name] = append(out[d.Name], fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
			}
		}
	}
	return out, devices, nil
}

// generateNames gives created objects a name from their generateName, as
// kube-apiserver does and the fake clientset does not.
func generateNames(client *fake.Clientset) {
	var n atomic.Int64
	client.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := action.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), n.Add(1)))
		}
		return false, nil, nil
	})
}

// metricValue reads one series from a registry.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// TestHealthBecomesTaints: a GPU the mock profile marks unhealthy is
// republished with the kit's NoSchedule taint on it and every one of its
// partitions, the other GPU untouched; a refused write of the tainted
// slices is retried while prepares go on; a notice is a None taint; a
// report of a device the driver does not publish is counted once and
// changes nothing; the taints go when the GPU is healthy again.
func TestHealthBecomesTaints(t *testing.T) {
	e := newEnv(t)
	a := claim("a", migDev(1, "1g.5gb", 0))
	client := fake.NewClientset([]runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}}, a}...)
	generateNames(client)
	var refuse, refused atomic.Int32
	client.PrependReactor("update", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() > 0 {
			refuse.Add(-1)
			refused.Add(1)
			return true, nil, apierrors.NewServiceUnavailable("etcd is away")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	metrics := driverkit.NewMetrics(driver)
	d, _, _ := startDriver(ctx, t, e, client, func(o *driverkit.Options) {
		o.HealthInterval = 20 * time.Millisecond
		o.Metrics = metrics
		o.HealthTaints = driverkit.HealthTaints{Notices: true}
	})
	perGPU := mig.A100.DevicesPerGPU()
	until := func(what string, cond func(taints map[string][]string, devices int) bool) {
		t.Helper()
		var last map[string][]string
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			taints, devices, err := publishedTaints(ctx, client)
			last = taints
			return err == nil && devices == 2*perGPU && cond(taints, devices), err
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v; published taints %v", what, err, last)
		}
	}
	events := func(event string) float64 {
		return metricValue(t, metrics.Registry(), driverkit.MetricHealthEvents, map[string]string{"driver": driver, "event": event})
	}
	until("the pool, untainted", func(taints map[string][]string, _ int) bool { return len(taints) == 0 })

	refuse.Store(3)
	mark(t, e, "unhealthy", "0", "XID 79: fallen off the bus\n")
	// The write is refused, and a prepare does not wait for it.
	if res, err := d.PrepareResourceClaims(ctx, []*resourcev1.ResourceClaim{a}); err != nil || res[a.UID].Err != nil {
		t.Fatalf("prepare while the taint write fails: %v %v", err, res[a.UID].Err)
	}
	want := "dractl.dev/unhealthy=XID-79-fallen-off-the-bus:NoSchedule"
	until("GPU 0 tainted", func(taints map[string][]string, _ int) bool {
		n := 0
		for dev, ts := range taints {
			if !strings.HasPrefix(dev, "gpu-0") || len(ts) != 1 || ts[0] != want {
				return false
			}
			n++
		}
		return n == perGPU
	})
	if refused.Load() != 3 {
		t.Errorf("%d slice writes refused, want the 3 the server refused before the retry got through", refused.Load())
	}
	if got := metricValue(t, metrics.Registry(), driverkit.MetricPublishFailures, map[string]string{"driver": driver, "reason": driverkit.PublishFailureUnavailable}); got != 3 {
		t.Errorf("publish failures %v, want 3", got)
	}
	if got := events(driverkit.HealthEventUnhealthy); got != float64(perGPU) {
		t.Errorf("unhealthy events %v, want one per device of GPU 0 (%d)", got, perGPU)
	}
	if got := d.Taints(); len(got) != perGPU {
		t.Errorf("Taints() names %d devices, want %d", len(got), perGPU)
	}

	small := migDev(1, "1g.5gb", 0)
	mark(t, e, "notices", small, "XID 43")
	mark(t, e, "unhealthy", "gpu-9", "no such GPU")
	until("a notice on one partition of GPU 1", func(taints map[string][]string, _ int) bool {
		ts := taints[small]
		return len(ts) == 1 && ts[0] == "dractl.dev/health-event=XID-43:None"
	})
	// Polls go on; the unknown device is counted when it appears only.
	time.Sleep(100 * time.Millisecond)
	if got := events(driverkit.HealthEventUnknownDevice); got != 1 {
		t.Errorf("unknown-device events %v, want 1", got)
	}

	for _, f := range []string{"unhealthy/0", "unhealthy/gpu-9", "notices/" + small} {
		if err := os.Remove(filepath.Join(e.GPUs.Dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	until("no taints", func(taints map[string][]string, _ int) bool { return len(taints) == 0 })
	if got := events(driverkit.HealthEventHealthy); got != float64(perGPU) {
		t.Errorf("healthy events %v, want %d", got, perGPU)
	}
}

// TestUnhealthyAtStart: a GPU unhealthy when the driver starts is tainted
// in the first slices it publishes, with the effect the operator chose.
func TestUnhealthyAtStart(t *testing.T) {
	e := newEnv(t)
	mark(t, e, "unhealthy", "1", "XID 48")
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	var creates atomic.Int32
	client.PrependReactor("create", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		s := action.(k8stesting.CreateAction).GetObject().(*resourcev1.ResourceSlice)
		for _, d := range s.Spec.Devices {
			if strings.HasPrefix(d.Name, "gpu-1") && (len(d.Taints) != 1 || d.Taints[0].Effect != resourcev1.DeviceTaintEffectNoExecute) {
				t.Errorf("slice %s created with device %s tainted %+v, want NoExecute", s.Name, d.Name, d.Taints)
			}
		}
		creates.Add(1)
		return false, nil, nil
	})
	generateNames(client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	startDriver(ctx, t, e, client, func(o *driverkit.Options) {
		o.HealthInterval = time.Hour
		o.HealthTaints = driverkit.HealthTaints{Evict: true}
	})
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		taints, devices, err := publishedTaints(ctx, client)
		return err == nil && devices == 2*mig.A100.DevicesPerGPU() && len(taints) == mig.A100.DevicesPerGPU(), err
	})
	if err != nil || creates.Load() == 0 {
		t.Fatalf("waiting for GPU 1 tainted: %v (%d creates)", err, creates.Load())
	}
}
