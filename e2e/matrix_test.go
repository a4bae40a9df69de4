//go:build matrix

package e2e

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/matrix"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/driver/gpu"
	poolpublish "github.com/dractl/dractl/pkg/driver/publish"
	"github.com/dractl/dractl/pkg/ops/monitor"
)

var matrixReleases = flag.String("matrix-releases", strings.Join(matrix.Releases, ","), "the kube-apiserver releases TestMatrix runs against, comma-separated")

// matrixVerbs are the live verbs TestMatrix runs at every release; their
// output must be the same at each (normalized), since every release
// stores the same objects.
var matrixVerbs = []struct {
	name string
	args []string
}{
	{"get-pools", []string{"get", "pools"}},
	{"get-pools-json", []string{"get", "pools", "-o", "json"}},
	{"describe-node", []string{"describe", "node", "node-1"}},
	{"describe-pool", []string{"describe", "pool", plainDriver + "/plain"}},
	{"explain-pod-scheduled", []string{"explain", "pod/user"}},
	{"explain-pod-pending", []string{"explain", "pod/pending"}},
	{"validate-live", []string{"validate", "--live"}},
}

// TestMatrix runs dractl's live verbs, its monitor and its drivers
// against a kube-apiserver process of each release (matrix.Releases: the
// newest patch of 1.34 to 1.37 and 1.38's newest pre-release on the
// module proxy, built by make e2e-matrix), each with every DRA feature
// gate it has:
//
//   - the control-plane publisher (publish.StartController) publishes a
//     pool of plain devices, a claim is allocated on it as kube-scheduler
//     would and another pod stays pending; get pools, describe,
//     explain pod and validate --live say the same at every release as at
//     the newest, and snapshot reads back offline to the same explanation;
//   - the monitor serves the pool's metrics;
//   - a DeviceTaintRule, which releases before 1.37 serve only in an alpha
//     or beta version, makes the live verbs refuse with the version named
//     there, and is read at 1.37;
//   - a pool with fields 1.37 added (partitionTypeAttribute,
//     nodeAllocatableResources) is refused by the kit before 1.37, each
//     field named, and taken at 1.37;
//   - the mock GPU driver publishes its node's partitionable pool from
//     1.35, and refuses 1.34, whose kube-apiserver wants counter sets in
//     the slice of their devices, with that reason;
//   - from 1.37, the server and `dractl validate --kube-version` of its
//     minor give every object of kubeVersionInputs the same verdict;
//   - each dractl-scheduler build (1.37, 1.38) schedules a pod with a
//     claim where kube-scheduler's skew policy allows it (a server of its
//     minor or one newer) and exits at start with the rule elsewhere.
func TestMatrix(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join(repo, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	releases := strings.Split(*matrixReleases, ",")
	// The newest first: the others are compared with it.
	slices.SortFunc(releases, func(a, b string) int {
		ma, _ := matrix.Minor(a)
		mb, _ := matrix.Minor(b)
		return mb - ma
	})
	schedulers := matrixSchedulers(t, bin)
	var reference map[string]string
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			c := matrix.Start(t, bin, release)
			t.Logf("kube-apiserver %s: DRA gates on %s, off %v; resource.k8s.io %s served besides v1", release, strings.Join(c.Gates, ","), c.Off, strings.Join(c.RuntimeConfig, ","))
			out := matrixRun(t, c, schedulers)
			if reference == nil {
				reference = out
				return
			}
			for name, got := range out {
				if got != reference[name] {
					t.Errorf("%s at %s differs from %s:\n--- %s\n%s\n--- %s\n%s", name, release, releases[0], release, got, releases[0], reference[name])
				}
			}
		})
	}
	// A server without resource.k8s.io/v1, as one older than 1.34 is: 1.34
	// with the API and DRA turned off (the one minor that lets DRA be
	// turned off).
	for _, release := range releases {
		if minor, _ := matrix.Minor(release); minor == resourceV1Minor {
			t.Run(release+"-without-v1", func(t *testing.T) {
				matrixWithoutV1(t, matrix.StartWithoutV1(t, bin, release))
			})
		}
	}
}

// resourceV1Minor is the first minor that serves resource.k8s.io/v1.
const resourceV1Minor = 34

// matrixWithoutV1: against a kube-apiserver that does not serve
// resource.k8s.io/v1, every live verb and the monitor exit with an error
// naming the API, and the control-plane publisher and the mock GPU driver
// do not start, with the same words.
func matrixWithoutV1(t *testing.T, c *matrix.Cluster) {
	ctx := t.Context()
	if list, err := c.Client.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1"); err == nil {
		t.Fatalf("kube-apiserver %s with resource.k8s.io/v1=false still serves it: %v", c.Release, list.APIResources)
	}
	t.Logf("kube-apiserver %s without resource.k8s.io/v1; resource.k8s.io %s served", c.Release, strings.Join(c.RuntimeConfig, ","))
	if err := createNode(ctx, c.Client, "node-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, podSpec("user", "node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "kube-apiserver " + c.Release + " does not serve resourceslices in resource.k8s.io/v1"
	kc := c.Kubeconfig(t)
	for _, args := range [][]string{
		{"get", "pools"},
		{"describe", "node", "node-1"},
		{"describe", "pool", plainDriver + "/plain"},
		{"explain", "pod/user"},
		{"validate", "--live"},
		{"snapshot", t.TempDir()},
	} {
		r := dractl(t, kc, args...)
		t.Logf("dractl %s: exit %d: %s", strings.Join(args, " "), r.code, strings.TrimSpace(r.err))
		if r.code != 2 || !strings.Contains(r.err, want) {
			t.Errorf("dractl %s without resource.k8s.io/v1: exit %d, stderr %q; want exit 2 and %q", strings.Join(args, " "), r.code, r.err, want)
		}
	}

	m, err := monitor.New(monitor.Options{Client: c.Client})
	if err != nil {
		t.Fatal(err)
	}
	m.SetLeading(true)
	monCtx, stopMonitor := context.WithTimeout(ctx, time.Minute)
	defer stopMonitor()
	if err := m.Run(monCtx); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the monitor without resource.k8s.io/v1: %v; want %q", err, want)
	} else {
		t.Logf("monitor: %v", err)
	}

	_, err = poolpublish.StartController(ctx, poolpublish.ControllerOptions{DriverName: plainDriver, KubeClient: c.Client,
		LeaderElection: poolpublish.LeaderElection{Namespace: "default", Identity: "matrix", RetryPeriod: 100 * time.Millisecond}},
		[]*api.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: api.ResourceSliceSpec{Pool: api.ResourcePool{Name: "plain"}, AllNodes: ptr.To(true),
			Devices: []api.Device{{Name: "dev-0"}}}}})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the control-plane publisher without resource.k8s.io/v1: %v; want %q", err, want)
	} else {
		t.Logf("publisher: %v", err)
	}

	driverCtx, stopDriver := context.WithTimeout(ctx, time.Minute)
	defer stopDriver()
	err = gpu.Run(driverCtx, matrixDriverConfig(t), c.Client)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the mock GPU driver without resource.k8s.io/v1: %v; want %q", err, want)
	} else {
		t.Logf("mock GPU driver: %v", err)
	}
}

// matrixRun does everything TestMatrix does at one release and returns
// the live verbs' and the monitor's outputs by name.
func matrixRun(t *testing.T, c *matrix.Cluster, schedulers map[int]string) map[string]string {
	ctx := t.Context()
	kc := c.Kubeconfig(t)
	if err := createNode(ctx, c.Client, "node-1"); err != nil {
		t.Fatal(err)
	}
	// No controller manager runs: the namespace's ServiceAccount, which
	// admission wants for pods, is made here.
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The plain pool, from the control-plane publisher.
	var devices []api.Device
	for i := range 4 {
		devices = append(devices, api.Device{Name: fmt.Sprintf("dev-%d", i), Attributes: map[api.QualifiedName]api.DeviceAttribute{"index": {IntValue: ptr.To(int64(i))}}})
	}
	pubCtx, stopPublisher := context.WithCancel(ctx)
	publisher, err := poolpublish.StartController(pubCtx, poolpublish.ControllerOptions{DriverName: plainDriver, KubeClient: c.Client,
		LeaderElection: poolpublish.LeaderElection{Namespace: "default", Identity: "matrix", RetryPeriod: 100 * time.Millisecond}},
		[]*api.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: api.ResourceSliceSpec{Pool: api.ResourcePool{Name: "plain"}, AllNodes: ptr.To(true), Devices: devices}}})
	if err != nil {
		t.Fatalf("the publisher at %s: %v", c.Release, err)
	}
	t.Cleanup(func() { stopPublisher(); publisher.Wait() })
	waitFor(t, time.Minute, "the plain pool", func(ctx context.Context) (bool, error) {
		list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1, err
	})

	// A class, a pod with one device allocated as kube-scheduler would,
	// and a pod that asks for more devices than there are.
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: plainDriver}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + plainDriver + `"`}}}}}
	if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := func(name string, count int64) {
		cl := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}}}}}}
		if _, err := c.Client.ResourceV1().ResourceClaims("default").Create(ctx, cl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claim("one-device", 1)
	claim("five-devices", 5)
	user, err := c.Client.CoreV1().Pods("default").Create(ctx, podSpec("user", "node-1", corev1.PodResourceClaim{Name: "dev", ResourceClaimName: ptr.To("one-device")}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, podSpec("pending", "", corev1.PodResourceClaim{Name: "devs", ResourceClaimName: ptr.To("five-devices")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allocateWith(t, ctx, c.Config, c.Client, "default", "one-device", "node-1", user)

	out := map[string]string{}
	for _, v := range matrixVerbs {
		r := dractl(t, kc, v.args...)
		if r.code != 0 {
			t.Errorf("dractl %s at %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(v.args, " "), c.Release, r.code, r.out, r.err)
		}
		out[v.name] = normalize(r.out)
		// validate --live judges by the server's minor, or says which
		// minor's rules it uses instead.
		if v.name == "validate-live" {
			note := "note: kube-apiserver " + c.Release + " serves the API of 1." + fmt.Sprint(c.Minor) + ", which dractl has no rules of; judged as 1.37"
			if got := strings.Contains(r.err, note); got != (c.Minor < 37) {
				t.Errorf("validate --live at %s: stderr %q; the note %q expected: %v", c.Release, r.err, note, c.Minor < 37)
			}
		}
	}
	if !strings.Contains(out["get-pools"], "plain") || !strings.Contains(out["explain-pod-scheduled"], "one-device") {
		t.Errorf("at %s the pool or the claim is missing:\n%s\n%s", c.Release, out["get-pools"], out["explain-pod-scheduled"])
	}
	snap := t.TempDir()
	if r := dractl(t, kc, "snapshot", snap); r.code != 0 {
		t.Errorf("snapshot at %s: exit %d: %s", c.Release, r.code, r.err)
	} else if offline := dractl(t, "", "explain", "pod/pending", "-f", snap); offline.code != 0 || normalize(offline.out) != out["explain-pod-pending"] {
		t.Errorf("explain pod/pending from the snapshot at %s (exit %d) differs from the cluster:\n%s%s", c.Release, offline.code, offline.out, offline.err)
	}

	// The monitor sees the pool as the verbs do.
	m, err := monitor.New(monitor.Options{Client: c.Client})
	if err != nil {
		t.Fatal(err)
	}
	m.SetLeading(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: m.Handler()}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	monCtx, stopMonitor := context.WithCancel(ctx)
	monDone := make(chan error, 1)
	go func() { monDone <- m.Run(monCtx) }()
	t.Cleanup(func() {
		stopMonitor()
		if err := <-monDone; err != nil {
			t.Errorf("monitor: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()
	labels := fmt.Sprintf("driver=%q,pool=%q", plainDriver, "plain")
	waitFor(t, time.Minute, "the monitor's metrics of the pool", func(context.Context) (bool, error) {
		return metric(t, base, monitor.MetricDevicesAllocated, labels) != "", nil
	})
	out["monitor-devices"] = metric(t, base, monitor.MetricDevices, labels)
	out["monitor-allocated"] = metric(t, base, monitor.MetricDevicesAllocated, labels)

	matrixTaintRule(t, c, kc)
	matrixDriver(t, c)
	// dractl's verdicts for the minors it has rules of, against the
	// server itself (1.37 is also judged in TestKubeVersionVerdicts).
	if c.Minor >= 37 {
		t.Run("kube-version-verdicts", func(t *testing.T) {
			judgeKubeVersion(t, t.Context(), c.Client, fmt.Sprintf("1.%d", c.Minor))
		})
	}
	matrixScheduler(t, c, kc, schedulers)
	return out
}

// matrixDriver: the kit refuses, before 1.37, a pool with fields 1.37
// added, naming each; the mock GPU driver publishes its partitionable pool
// from 1.35 and refuses 1.34 with the reason.
func matrixDriver(t *testing.T, c *matrix.Cluster) {
	ctx := t.Context()
	srv, err := poolpublish.ReadServer(c.Client.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("publish.ReadServer at %s: %s, minor %s, rules %s", c.Release, srv.Version, srv.Minor, srv.Rules)
	if srv.Minor.Minor != c.Minor || srv.Rules.Minor != max(c.Minor, 37) {
		t.Errorf("ReadServer: minor %s, rules %s; want 1.%d, 1.%d", srv.Minor, srv.Rules, c.Minor, max(c.Minor, 37))
	}
	_, err = poolpublish.BuildFor(srv, gpu.DriverName, "node-2", newerFieldsPool())
	switch {
	case c.Minor >= 37 && err != nil:
		t.Errorf("a pool with the fields of 1.37, at %s: %v", c.Release, err)
	case c.Minor < 37:
		for _, f := range []string{"spec.partitionTypeAttribute", "spec.devices[0].nodeAllocatableResources"} {
			if want := f + ": Forbidden: kube-apiserver " + c.Release + " does not know this field of resource.k8s.io/v1"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("a pool with the fields of 1.37, at %s: %v; want %q", c.Release, err, want)
			}
		}
	}

	cfg := matrixDriverConfig(t)
	driverCtx, stopDriver := context.WithCancel(ctx)
	driverDone := make(chan error, 1)
	go func() { driverDone <- gpu.Run(driverCtx, cfg, c.Client) }()
	if c.Minor < 35 {
		want := "kube-apiserver " + c.Release + " takes counter sets only in the slice of the devices that consume them"
		select {
		case err := <-driverDone:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("the mock GPU driver at %s: %v; want %q", c.Release, err, want)
			}
		case <-time.After(time.Minute):
			stopDriver()
			t.Errorf("the mock GPU driver runs at %s; want it refused with %q (%v)", c.Release, want, <-driverDone)
		}
		stopDriver()
		return
	}
	t.Cleanup(func() {
		stopDriver()
		if err := <-driverDone; err != nil {
			t.Errorf("driver: %v", err)
		}
	})
	waitFor(t, time.Minute, "the mock GPU driver's pool", func(ctx context.Context) (bool, error) {
		select {
		case err := <-driverDone:
			driverDone <- err
			return false, fmt.Errorf("the driver stopped: %v", err)
		default:
		}
		list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + gpu.DriverName})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		return len(list.Items) == int(list.Items[0].Spec.Pool.ResourceSliceCount), nil
	})
	r := dractl(t, c.Kubeconfig(t), "get", "pools", "node-1")
	if r.code != 0 || !strings.Contains(r.out, "node-1") {
		t.Errorf("get pools of the mock GPU driver at %s: exit %d\n%s%s", c.Release, r.code, r.out, r.err)
	}
}

// matrixDriverConfig is the mock GPU driver of node-1 with two GPUs, its
// directories in a temporary one of its own (under /tmp: unix socket
// paths must be short).
func matrixDriverConfig(t *testing.T) gpu.Config {
	dir, err := os.MkdirTemp("", "mx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"reg", "plugin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return gpu.Config{
		DriverName: gpu.DriverName, NodeName: "node-1", Model: "a100", GPUs: 2,
		StateDir: filepath.Join(dir, "state"), CDIDir: filepath.Join(dir, "cdi"),
		RegistrarDir: filepath.Join(dir, "reg"), PluginDir: filepath.Join(dir, "plugin"),
	}
}

// newerFieldsPool is a pool that sets fields resource.k8s.io/v1 gained in
// 1.37: partitionTypeAttribute and a device's nodeAllocatableResources.
func newerFieldsPool() []*api.ResourceSlice {
	one := resourceQuantity("1")
	return []*api.ResourceSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "counters"}, Spec: api.ResourceSliceSpec{
			SharedCounters: []api.CounterSet{{Name: "gpu-0", Counters: map[string]api.Counter{"memory": {Value: resourceQuantity("40Gi")}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "devices"}, Spec: api.ResourceSliceSpec{
			PartitionTypeAttribute: ptr.To[api.FullyQualifiedName](gpu.DriverName + "/profile"),
			Devices: []api.Device{{Name: "gpu-0-1g",
				Attributes:       map[api.QualifiedName]api.DeviceAttribute{"profile": {StringValue: ptr.To("1g.10gb")}},
				Capacity:         map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: resourceQuantity("10Gi")}},
				ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]api.Counter{"memory": {Value: resourceQuantity("10Gi")}}}},
				NodeAllocatableResources: map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
					"memory": {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To[api.QualifiedName]("memory"), CapacityMultiplier: &one}}},
			}}}},
	}
}

// matrixTaintRule: a DeviceTaintRule on one of the pool's devices. A
// release before 1.37 serves it in an alpha or beta version only, which
// dractl does not read: the verbs that read rules (explain pod,
// validate --live, snapshot) refuse, naming it, until the rule is gone.
// At 1.37 it is resource.k8s.io/v1's and read.
func matrixTaintRule(t *testing.T, c *matrix.Cluster, kc string) {
	ctx := t.Context()
	version := ""
	for _, v := range []string{"v1", "v1beta2", "v1alpha3"} {
		list, err := c.Client.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/" + v)
		if err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "devicetaintrules" }) {
			version = v
			break
		}
	}
	if version == "" {
		t.Fatalf("kube-apiserver %s serves no DeviceTaintRules", c.Release)
	}
	t.Logf("DeviceTaintRules at %s: resource.k8s.io/%s", c.Release, version)
	rule := []byte(`{"apiVersion":"resource.k8s.io/` + version + `","kind":"DeviceTaintRule","metadata":{"name":"maintenance"},` +
		`"spec":{"deviceSelector":{"driver":"` + plainDriver + `","pool":"plain","device":"dev-1"},"taint":{"key":"example.com/maintenance","effect":"NoSchedule"}}}`)
	rest := c.Client.Discovery().RESTClient()
	path := "/apis/resource.k8s.io/" + version + "/devicetaintrules"
	if err := rest.Post().AbsPath(path).Body(rule).SetHeader("Content-Type", "application/json").Do(ctx).Error(); err != nil {
		t.Fatalf("creating a DeviceTaintRule in resource.k8s.io/%s at %s: %v", version, c.Release, err)
	}
	verbs := [][]string{{"explain", "pod/pending"}, {"validate", "--live"}, {"snapshot", t.TempDir()}}
	for _, args := range verbs {
		r := dractl(t, kc, args...)
		if version == "v1" {
			if r.code != 0 && !(args[0] == "validate" && r.code == 1) {
				t.Errorf("%s with a DeviceTaintRule at %s: exit %d\n%s", args[0], c.Release, r.code, r.err)
			}
			continue
		}
		want := "holds DeviceTaintRules in resource.k8s.io/" + version + ", which dractl does not read"
		if r.code != 2 || !strings.Contains(r.err, want) {
			t.Errorf("%s with a DeviceTaintRule in %s at %s: exit %d, stderr %q; want exit 2 and %q", args[0], version, c.Release, r.code, r.err, want)
		}
	}
	if err := rest.Delete().AbsPath(path + "/maintenance").Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	if r := dractl(t, kc, "explain", "pod/pending"); r.code != 0 {
		t.Errorf("explain once the DeviceTaintRule is gone, at %s: exit %d\n%s", c.Release, r.code, r.err)
	}
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }
