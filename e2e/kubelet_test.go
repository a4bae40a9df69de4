package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/driverkit"
	"github.com/dractl/dractl/pkg/mockgpu"
)

// The GPU node of these tests: dractl-gpu-driver, the binary built from
// cmd/dractl-gpu-driver, with two A100-40GB GPUs, running as the
// ServiceAccount of deploy/driver with exactly its RBAC and under its
// admission policy (the token of a pod on the node, as the DaemonSet's
// pod has), registered with the kubelet's DRA manager through the plugin
// manager's registration directory.
const (
	gpuDriver    = mockgpu.DriverName
	gpuModel     = "a100"
	gpuCount     = 2
	driverRBAC   = "../deploy/driver/rbac.yaml"
	slicePolicy  = "../deploy/driver/resourceslice-policy.yaml"
	gpuClasses   = "../deploy/driver/deviceclasses.yaml"
	migClass3g   = "mig-3g-20gb.dractl.dev"
	migClass2g   = "mig-2g-10gb.dractl.dev"
	failpointEnv = "DRACTL_GPU_DRIVER_FAILPOINT"
)

// buildDriver builds dractl-gpu-driver once per run of the tests.
func buildDriver(t testing.TB) string { return driverBinary.build(t) }

// gpuNode is a Node with the kubelet's DRA manager and dractl-gpu-driver
// processes that come and go; its directories stay.
type gpuNode struct {
	cp                       *framework.ControlPlane
	name                     string
	kubelet                  *framework.Kubelet
	bin, kubeconfig          string
	stateDir, cdiDir, logDir string
	// backend are the flags choosing the driver's GPUs.
	backend []string

	cmd     *exec.Cmd
	starts  int
	exited  chan struct{}
	exitErr error
}

func newGPUNode(t *testing.T, cp *framework.ControlPlane, name string) *gpuNode {
	t.Helper()
	// Short: the sockets live beneath it (108 bytes at most).
	root, err := os.MkdirTemp("", "node")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	createNodes(t, cp, name)
	n := &gpuNode{
		cp: cp, name: name, bin: buildDriver(t),
		kubelet:  &framework.Kubelet{NodeName: name, RootDir: filepath.Join(root, "kubelet")},
		stateDir: filepath.Join(root, "driver"), cdiDir: filepath.Join(root, "cdi"), logDir: t.TempDir(),
		backend: []string{"--gpu-model", gpuModel, fmt.Sprintf("--gpus=%d", gpuCount)},
	}
	cp.Start(n.kubelet)
	sa := cp.ServiceAccountOnNode(t, "dractl-gpu-driver", "dractl-gpu-driver", name)
	cp.Apply(t, driverRBAC, slicePolicy, gpuClasses)
	n.kubeconfig = cp.Kubeconfig(cp.Via(sa))
	t.Cleanup(func() {
		n.stop(t)
		if t.Failed() {
			n.logs(t)
		}
	})
	return n
}

// start runs the driver, which kills itself at failpoint when not empty,
// and waits until it serves: both its sockets exist again.
func (n *gpuNode) start(t testing.TB, failpoint driverkit.Failpoint) {
	t.Helper()
	sockets := []string{
		filepath.Join(n.kubelet.PluginDir(gpuDriver), "dra.sock"),
		filepath.Join(n.kubelet.RegistrationDir(), gpuDriver+"-reg.sock"),
	}
	// A killed driver leaves its sockets behind: they do not count.
	for _, s := range sockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	n.starts++
	log, err := os.Create(filepath.Join(n.logDir, fmt.Sprintf("driver-%d.log", n.starts)))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig", n.kubeconfig, "--node-name", n.name}, n.backend...)
	n.cmd = exec.Command(n.bin, append(args,
		"--state-dir", n.stateDir, "--cdi-dir", n.cdiDir,
		"--registrar-dir", n.kubelet.RegistrationDir(), "--plugin-dir", n.kubelet.PluginDir(gpuDriver),
		"--v=2")...)
	n.cmd.Env = append(os.Environ(), failpointEnv+"="+string(failpoint))
	n.cmd.Stdout, n.cmd.Stderr = log, log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) {
		n.exitErr = c.Wait()
		log.Close()
		close(done)
	}(n.cmd, n.exited)
	deadline := time.Now().Add(time.Minute)
	for !exist(sockets...) {
		select {
		case <-n.exited:
			n.cmd = nil
			t.Fatalf("the driver exited before serving: %v", n.exitErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the driver did not start serving")
		}
	}
}

func exist(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// killed waits for the driver to die of SIGKILL at its failpoint.
func (n *gpuNode) killed(t testing.TB) {
	t.Helper()
	select {
	case <-n.exited:
		n.cmd = nil
		var ee *exec.ExitError
		if !errors.As(n.exitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the driver ended with %v, want SIGKILL at its failpoint", n.exitErr)
		}
	case <-time.After(time.Minute):
		t.Fatal("the driver did not reach its failpoint")
	}
}

// stop ends the driver as the kubelet ends a pod: SIGTERM.
func (n *gpuNode) stop(t testing.TB) {
	if n.cmd == nil {
		return
	}
	if !terminate(n.cmd.Process, n.exited, syscall.SIGTERM, 30*time.Second) {
		t.Error("the driver did not stop on SIGTERM")
	}
	n.cmd = nil
}

func (n *gpuNode) restart(t testing.TB, failpoint driverkit.Failpoint) {
	t.Helper()
	n.stop(t)
	n.start(t, failpoint)
}

func (n *gpuNode) logs(t testing.TB) {
	entries, _ := os.ReadDir(n.logDir)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(n.logDir, e.Name()))
		if len(data) > 8000 {
			data = data[len(data)-8000:]
		}
		t.Logf("%s:\n%s", e.Name(), data)
	}
}

// published waits until the driver's pool is complete in the API server
// and returns its slices' resource versions by name.
func (n *gpuNode) published(t testing.TB) map[string]string {
	t.Helper()
	var out map[string]string
	waitFor(t, time.Minute, "the driver's pool to be published", func(ctx context.Context) (bool, error) {
		sel := fields.Set{resourcev1.ResourceSliceSelectorNodeName: n.name, resourcev1.ResourceSliceSelectorDriver: gpuDriver}
		l, err := n.cp.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
		if err != nil || len(l.Items) == 0 {
			return false, err
		}
		out = map[string]string{}
		gen := l.Items[0].Spec.Pool.Generation
		for _, s := range l.Items {
			if s.Spec.Pool.Generation != gen {
				return false, nil
			}
			out[s.Name] = s.ResourceVersion
		}
		return int64(len(l.Items)) == l.Items[0].Spec.Pool.ResourceSliceCount, nil
	})
	return out
}

// partitions are the MIG devices on the node, read from the simulated
// GPUs' directory, not from the driver.
func (n *gpuNode) partitions(t testing.TB) []driverkit.Partition {
	t.Helper()
	gpus, err := mockgpu.New(gpuDriver, n.name, gpuModel, gpuCount, filepath.Join(n.stateDir, "gpus"))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := gpus.Partitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func list(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// checkPrepared checks the node for one running pod whose claim has one
// device of the driver: exactly one partition, made for the claim on the
// allocated device; one CDI spec and one driver checkpoint; the kubelet's
// checkpoint holds the claim, for the pod, with the driver's answer; and
// what the kubelet handed the runtime, injected into an OCI spec from the
// spec files alone, gives the container that partition.
func (n *gpuNode) checkPrepared(t testing.TB, pod *corev1.Pod, claim *resourcev1.ResourceClaim) {
	t.Helper()
	results := claim.Status.Allocation.Devices.Results
	if len(results) != 1 || results[0].Driver != gpuDriver || results[0].Pool != n.name {
		t.Fatalf("claim %s allocated %+v, want one device of %s on %s", claim.Name, results, gpuDriver, n.name)
	}
	dev := results[0].Device
	parts := n.partitions(t)
	if len(parts) != 1 || parts[0].Device != dev || parts[0].Claim != claim.UID {
		t.Fatalf("partitions on the node: %+v, want one of %s for claim %s", parts, dev, claim.UID)
	}
	if specs := list(t, n.cdiDir); len(specs) != 1 || !strings.Contains(specs[0], string(claim.UID)) {
		t.Fatalf("CDI specs %v, want one for claim %s", specs, claim.UID)
	}
	if ckpts := list(t, filepath.Join(n.stateDir, "claims")); !slices.Equal(ckpts, []string{string(claim.UID) + ".json"}) {
		t.Fatalf("driver checkpoints %v, want one for claim %s", ckpts, claim.UID)
	}

	prepared, err := n.kubelet.PreparedClaims()
	if err != nil {
		t.Fatal(err)
	}
	if len(prepared) != 1 || prepared[0].ClaimUID != claim.UID || !prepared[0].PodUIDs.Has(string(pod.UID)) {
		t.Fatalf("the kubelet's checkpoint holds %+v, want claim %s of pod %s", prepared, claim.UID, pod.UID)
	}
	devices := prepared[0].DriverState[gpuDriver].Devices
	if len(devices) != 1 || devices[0].PoolName != n.name || devices[0].DeviceName != dev ||
		!slices.Equal(devices[0].RequestNames, []string{results[0].Request}) || len(devices[0].CDIDeviceIDs) != 1 {
		t.Fatalf("the kubelet recorded %+v for %s", devices, dev)
	}
	ids := n.kubelet.CDIDevices(pod.UID, pod.Spec.Containers[0].Name)
	if !slices.Equal(ids, devices[0].CDIDeviceIDs) {
		t.Fatalf("the container gets CDI devices %v, the kubelet recorded %v", ids, devices[0].CDIDeviceIDs)
	}

	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(n.cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		t.Fatalf("injecting %v: %v (unresolved %v)", ids, err, unresolved)
	}
	env := strings.Join(spec.Process.Env, "\n")
	prefix := mockgpu.EnvPrefix(dev)
	for _, want := range []string{prefix + "UUID=" + parts[0].ID, prefix + "CLAIM=" + string(claim.UID)} {
		if !strings.Contains(env, want) {
			t.Errorf("the container's environment lacks %q:\n%s", want, env)
		}
	}
	if len(spec.Linux.Devices) != 2 || !strings.HasPrefix(spec.Linux.Devices[0].Path, "/dev/nvidia") {
		t.Errorf("the container's device nodes %+v: want the GPU and the MIG capability", spec.Linux.Devices)
	}
}

// checkClean checks that nothing of any claim is left on the node.
func (n *gpuNode) checkClean(t testing.TB) {
	t.Helper()
	parts, specs, ckpts := n.partitions(t), list(t, n.cdiDir), list(t, filepath.Join(n.stateDir, "claims"))
	if len(parts)+len(specs)+len(ckpts) != 0 {
		t.Fatalf("left on the node: partitions %+v, CDI specs %v, driver checkpoints %v", parts, specs, ckpts)
	}
	prepared, err := n.kubelet.PreparedClaims()
	if err != nil {
		t.Fatal(err)
	}
	if len(prepared) != 0 {
		t.Fatalf("the kubelet's checkpoint still holds %+v", prepared)
	}
}

func running(t testing.TB, cp *framework.ControlPlane, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, 2*time.Minute, "pod "+name+" to run", func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		pod = p
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	return pod
}

// deleteAndWait deletes a pod as a user does (with its grace period) and
// waits until the kubelet has removed it.
func deleteAndWait(t testing.TB, cp *framework.ControlPlane, pod *corev1.Pod) {
	t.Helper()
	deletePod(t, cp, pod)
	gone(t, cp, pod)
}

func deletePod(t testing.TB, cp *framework.ControlPlane, pod *corev1.Pod) {
	t.Helper()
	if err := cp.Client.CoreV1().Pods(pod.Namespace).Delete(cp.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func gone(t testing.TB, cp *framework.ControlPlane, pod *corev1.Pod) {
	t.Helper()
	waitFor(t, 2*time.Minute, "pod "+pod.Name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// released checks that a claim is deallocated or deleted.
func released(t testing.TB, cp *framework.ControlPlane, claim *resourcev1.ResourceClaim) {
	t.Helper()
	waitFor(t, time.Minute, "claim "+claim.Name+" to be released", func(ctx context.Context) (bool, error) {
		c, err := cp.Client.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && c.UID == claim.UID && c.Status.Allocation == nil && len(c.Status.ReservedFor) == 0, err
	})
}

// failedPrepare waits for the kubelet's Event that preparing the pod's
// claims failed.
func failedPrepare(t testing.TB, cp *framework.ControlPlane, pod types.UID, name string) {
	t.Helper()
	waitFor(t, time.Minute, "a FailedPrepareDynamicResources event on pod "+name, func(ctx context.Context) (bool, error) {
		sel := fields.Set{"involvedObject.uid": string(pod), "reason": "FailedPrepareDynamicResources"}
		l, err := cp.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
		return err == nil && len(l.Items) > 0, err
	})
}

func podUID(t testing.TB, cp *framework.ControlPlane, name string) types.UID {
	t.Helper()
	p, err := cp.Client.CoreV1().Pods("default").Get(cp.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.UID
}

// TestKubeletPreparesMIGClaim is the whole node side of DRA: the driver
// publishes its pool, a pod with a MIG claim template is scheduled by
// dractl-scheduler, the kubelet's DRA manager has the driver prepare the
// claim over its socket (the MIG device is created, the CDI spec written,
// the container gets the device), and deleting the pod unprepares it
// (the MIG device and the CDI spec go away, the claim is released) while
// the published slices stay as they were.
func TestKubeletPreparesMIGClaim(t *testing.T) {
	cp := startScheduling(t)
	n := newGPUNode(t, cp, "gpu-node")
	n.start(t, "")
	slicesBefore := n.published(t)
	waitFor(t, time.Minute, "the driver to register with the kubelet", func(context.Context) (bool, error) {
		return n.kubelet.Registered(gpuDriver), nil
	})

	createTemplate(t, cp, "mig-3g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass3g, 1)}})
	createClaimPod(t, cp, "trainer", dractlProfile, "mig-3g", "")
	pod := running(t, cp, "trainer")
	claim := claimOf(t, cp, "trainer")
	n.checkPrepared(t, pod, claim)

	deleteAndWait(t, cp, pod)
	n.checkClean(t)
	released(t, cp, claim)
	if after := n.published(t); !maps.Equal(after, slicesBefore) {
		t.Errorf("the driver's slices changed: %v, were %v", after, slicesBefore)
	}
}

// TestDriverCrashConverges kills dractl-gpu-driver (SIGKILL, the real
// binary) at each step of prepare and of unprepare while the kubelet's
// DRA manager calls it for a pod, then starts it again: the kubelet's
// retries converge on the pod running with its claim prepared exactly
// once (one MIG device, one CDI spec, one checkpoint, the kubelet's
// record matching the driver's), resp. on the pod gone and nothing left.
// Pods go through the stock scheduler profile here.
func TestDriverCrashConverges(t *testing.T) {
	cp := startScheduling(t)
	n := newGPUNode(t, cp, "gpu-node")
	n.start(t, "")
	slicesBefore := n.published(t)
	createTemplate(t, cp, "mig-2g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass2g, 1)}})

	for i, fp := range driverkit.PrepareFailpoints {
		t.Run("prepare/"+string(fp), func(t *testing.T) {
			n.restart(t, fp)
			name := fmt.Sprintf("prepare-%d", i)
			createClaimPod(t, cp, name, stockProfile, "mig-2g", "")
			n.killed(t)
			failedPrepare(t, cp, podUID(t, cp, name), name)

			n.start(t, "")
			pod := running(t, cp, name)
			claim := claimOf(t, cp, name)
			n.checkPrepared(t, pod, claim)
			deleteAndWait(t, cp, pod)
			n.checkClean(t)
			released(t, cp, claim)
		})
	}
	for i, fp := range driverkit.UnprepareFailpoints {
		t.Run("unprepare/"+string(fp), func(t *testing.T) {
			if n.cmd == nil {
				n.start(t, "")
			}
			name := fmt.Sprintf("unprepare-%d", i)
			createClaimPod(t, cp, name, stockProfile, "mig-2g", "")
			pod := running(t, cp, name)
			claim := claimOf(t, cp, name)
			n.checkPrepared(t, pod, claim)

			n.restart(t, fp)
			deletePod(t, cp, pod)
			n.killed(t)
			p, err := cp.Client.CoreV1().Pods("default").Get(cp.Context(), name, metav1.GetOptions{})
			if err != nil || p.DeletionTimestamp == nil {
				t.Fatalf("with its unprepare interrupted, the pod should be Terminating: %v %v", p, err)
			}

			n.start(t, "")
			gone(t, cp, pod)
			n.checkClean(t)
			released(t, cp, claim)
		})
	}
	if after := n.published(t); !maps.Equal(after, slicesBefore) {
		t.Errorf("the driver's slices changed across %d restarts: %v, were %v", n.starts, after, slicesBefore)
	}
}

// TestKubeletStatusWritesSurviveFaults: the kubelet reaches the API
// server through a proxy that fails every write for a while (conflicts,
// 429s, timeouts, answers lost after the write); once writes pass again,
// a pod bound to its node is reported Running and a deleted pod is
// removed, as the kubelet's status manager retries until its status is
// stored.
func TestKubeletStatusWritesSurviveFaults(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	proxy, err := framework.NewFaultProxy(cp.Config.Host, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	cp.RouteComponents(proxy)
	root, err := os.MkdirTemp("", "node")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	createNodes(t, cp, "node-1")
	cp.Start(&framework.Kubelet{NodeName: "node-1", RootDir: filepath.Join(root, "kubelet")})

	proxy.SetRate(1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "node-1",
		Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	pod, err = cp.Client.CoreV1().Pods("default").Create(cp.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	if _, writes := proxy.Injected(); writes == 0 {
		t.Fatal("the kubelet wrote nothing while every write failed")
	}
	proxy.SetRate(0)
	running(t, cp, "p")

	proxy.SetRate(1)
	deletePod(t, cp, pod)
	time.Sleep(3 * time.Second)
	proxy.SetRate(0)
	gone(t, cp, pod)
}
