package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/ops/monitor"
)

// startMonitor applies deploy/monitor/ and runs the monitor in this
// process with the credentials of the ServiceAccount those manifests
// create, so that their RBAC is what is tested. It returns the base URL of
// its metrics endpoint.
func startMonitor(t testing.TB, cp *framework.ControlPlane, grace time.Duration) (string, *monitor.Monitor) {
	t.Helper()
	applied := cp.Apply(t, filepath.Join(repo, "deploy", "monitor"))
	kinds := map[string]bool{}
	for _, o := range applied {
		kinds[o.GetKind()] = true
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service"} {
		if !kinds[k] {
			t.Errorf("deploy/monitor has no %s", k)
		}
	}
	cfg := cp.ServiceAccount(t, "dractl-system", "dractl-monitor")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := monitor.New(monitor.Options{Client: cs, IncompleteGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: m.Handler()}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithCancel(cp.Context())
	done := make(chan error, 1)
	go func() {
		done <- m.RunWithLeaderElection(ctx, monitor.LeaderElection{Namespace: "dractl-system", Identity: "e2e",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("monitor: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()
	eventually(t, "the monitor to be ready", func(context.Context) (bool, error) {
		code, _ := get(base + "/readyz")
		return code == http.StatusOK, nil
	})
	return base, m
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the line of a metric with exactly these labels, or "".
func metric(t testing.TB, base, name string, labels string) string {
	t.Helper()
	code, body := get(base + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	prefix := name + "{" + labels + "} "
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimPrefix(line, prefix)
		}
	}
	return ""
}

func waitMetric(t testing.TB, base, name, labels, want string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s{%s} = %s", name, labels, want), func(context.Context) (bool, error) {
		got := metric(t, base, name, labels)
		return got == want, fmt.Errorf("%s{%s} is %q", name, labels, got)
	})
}

// waitEvent waits for an events.k8s.io/v1 Event with reason on the
// ResourceSlice named regarding and returns it.
func waitEvent(t testing.TB, cp *framework.ControlPlane, reason, regarding string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	eventually(t, reason+" on ResourceSlice "+regarding, func(ctx context.Context) (bool, error) {
		list, err := cp.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == "ResourceSlice" && e.Regarding.Name == regarding {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// gpuSlices is a pool of one GPU split as KEP-4815 splits it: a counter
// slice and a device slice of four 10Gi partitions.
func gpuSlices(poolName, node string, count int64) (counters, devices *resourcev1.ResourceSlice) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
	spec := resourcev1.ResourceSliceSpec{
		Driver:   "gpu.example.com",
		Pool:     resourcev1.ResourcePool{Name: poolName, Generation: 1, ResourceSliceCount: count},
		NodeName: ptr.To(node),
	}
	counters = &resourcev1.ResourceSlice{ObjectMeta: meta(poolName + "-counters"), Spec: spec}
	counters.Spec.SharedCounters = []resourcev1.CounterSet{{Name: "gpu-0", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("40Gi")}}}}
	devices = &resourcev1.ResourceSlice{ObjectMeta: meta(poolName + "-devices"), Spec: spec}
	for i := range 4 {
		devices.Spec.Devices = append(devices.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("part-%d", i),
			ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0",
				Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("10Gi")}}}},
		})
	}
	return counters, devices
}

// TestMonitorReportsBrokenPools breaks pools the three ways a driver can
// (a device published twice, a counter set nobody publishes, a
// resourceSliceCount its slices never reach), checks the Events and
// metrics that say so, repairs them and checks the recovery.
func TestMonitorReportsBrokenPools(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	ctx := cp.Context()
	slices := cp.Client.ResourceV1().ResourceSlices()
	create := func(s *resourcev1.ResourceSlice) {
		t.Helper()
		if _, err := slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	base, _ := startMonitor(t, cp, 2*time.Second)
	if code, body := get(base + "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %s", code, body)
	}

	// Healthy to start with.
	c, d := gpuSlices("healthy", "node-1", 2)
	create(c)
	create(d)
	waitMetric(t, base, monitor.MetricPools, `condition="ok"`, "1")
	waitMetric(t, base, monitor.MetricDevices, `driver="gpu.example.com",pool="healthy"`, "4")
	waitMetric(t, base, monitor.MetricCounterCapacity, `counter="memory",counter_set="gpu-0",driver="gpu.example.com",pool="healthy"`, "4.294967296e+10")

	// A device published twice: a third slice repeats part-0.
	c, d = gpuSlices("dup", "node-2", 3)
	extra := d.DeepCopy()
	extra.Name = "dup-extra"
	extra.Spec.Devices = extra.Spec.Devices[:1]
	create(c)
	create(d)
	create(extra)
	ev := waitEvent(t, cp, monitor.ReasonPoolInvalid, "dup-extra")
	if ev.Type != "Warning" || ev.Related == nil || ev.Related.Kind != "Node" || ev.Related.Name != "node-2" ||
		!strings.Contains(ev.Note, "pool gpu.example.com/dup is invalid") || !strings.Contains(ev.Note, "Duplicate value") {
		t.Errorf("PoolInvalid event: type %s related %v note %q", ev.Type, ev.Related, ev.Note)
	}
	if ev.ReportingController != monitor.Component {
		t.Errorf("event reported by %q, want %q", ev.ReportingController, monitor.Component)
	}
	waitMetric(t, base, monitor.MetricValidationErrors, `driver="gpu.example.com",pool="dup",reason="FieldValueDuplicate"`, "1")
	waitMetric(t, base, monitor.MetricPoolCondition, `condition="invalid",driver="gpu.example.com",pool="dup"`, "1")

	// A counter set nobody publishes: the devices come without their
	// counter slice; each of the four devices is a problem.
	_, d = gpuSlices("orphan", "node-3", 1)
	create(d)
	waitEvent(t, cp, monitor.ReasonPoolInvalid, "orphan-devices")
	waitMetric(t, base, monitor.MetricValidationErrors, `driver="gpu.example.com",pool="orphan",reason="FieldValueNotFound"`, "4")

	// A resourceSliceCount of 3 that two slices never reach: incomplete,
	// reported once the grace period is over.
	c, d = gpuSlices("short", "node-4", 3)
	create(c)
	create(d)
	waitMetric(t, base, monitor.MetricPoolCondition, `condition="incomplete",driver="gpu.example.com",pool="short"`, "1")
	ev = waitEvent(t, cp, monitor.ReasonPoolIncomplete, "short-devices")
	if !strings.Contains(ev.Note, "2 of 3 slices of generation 1") {
		t.Errorf("PoolIncomplete note %q does not say how many slices are missing", ev.Note)
	}
	waitMetric(t, base, monitor.MetricPools, `condition="invalid"`, "2")
	waitMetric(t, base, monitor.MetricPools, `condition="incomplete"`, "1")

	// Repairs: drop the duplicate and count two slices; publish the
	// missing counter set; correct the count.
	if err := slices.Delete(ctx, "dup-extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	setCount := func(name string, n int64) {
		t.Helper()
		s, err := slices.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Pool.ResourceSliceCount = n
		if _, err := slices.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setCount("dup-counters", 2)
	setCount("dup-devices", 2)
	c, _ = gpuSlices("orphan", "node-3", 2)
	create(c)
	setCount("orphan-devices", 2)
	setCount("short-counters", 2)
	setCount("short-devices", 2)
	for _, s := range []string{"dup-devices", "orphan-devices", "short-devices"} {
		ev := waitEvent(t, cp, monitor.ReasonPoolRecovered, s)
		if ev.Type != "Normal" {
			t.Errorf("PoolRecovered on %s is %s, want Normal", s, ev.Type)
		}
	}
	waitMetric(t, base, monitor.MetricPools, `condition="ok"`, "4")
	waitMetric(t, base, monitor.MetricPools, `condition="invalid"`, "0")
	if got := metric(t, base, monitor.MetricValidationErrors, `driver="gpu.example.com",pool="dup",reason="FieldValueDuplicate"`); got != "" {
		t.Errorf("validation errors of the repaired pool still reported: %s", got)
	}

	// Allocations show in the counters.
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "half"}}
	claim.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"}}}
	if _, err := cp.Client.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{corev1.LabelHostname: "node-1"}}}
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allocate(t, cp, "default", "half", "node-1", nil)
	waitMetric(t, base, monitor.MetricDevicesAllocated, `driver="gpu.example.com",pool="healthy"`, "1")
	waitMetric(t, base, monitor.MetricCounterConsumed, `counter="memory",counter_set="gpu-0",driver="gpu.example.com",pool="healthy"`, "1.073741824e+10")
}

// TestMonitorCommand runs `dractl monitor` itself (flags, kubeconfig,
// leader election through a Lease) and checks it serves and leads.
func TestMonitorCommand(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	kc := cp.Kubeconfig(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() {
		done <- dractlContext(ctx, kc, "monitor", "--metrics-bind-address", addr, "--leader-elect-namespace", "default")
	}()
	eventually(t, "dractl monitor to be ready", func(context.Context) (bool, error) {
		code, body := get("http://" + addr + "/readyz")
		return code == http.StatusOK, fmt.Errorf("%d %s", code, body)
	})
	eventually(t, "dractl monitor to take the Lease", func(ctx context.Context) (bool, error) {
		l, err := cp.Client.CoordinationV1().Leases("default").Get(ctx, monitor.Component, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", err
	})
	cancel()
	r := <-done
	if r.code != 0 || !strings.Contains(r.err, "serving /metrics, /healthz and /readyz on "+addr) {
		t.Errorf("dractl monitor: exit %d\n%s", r.code, r.err)
	}
}
