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
	"strconv"
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
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
	"k8s.io/utils/ptr"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/driver/gpu"
	migtables "github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// The GPU node of these tests: dractl-gpu-driver, the binary built from
// cmd/dractl-gpu-driver, with two A100-40GB GPUs, running as the
// ServiceAccount of deploy/driver with exactly its RBAC and under its
// admission policy (the token of a pod on the node, as the DaemonSet's
// pod has), registered with the kubelet through the plugin manager's
// registration directory.
const (
	gpuDriver    = gpu.DriverName
	gpuModel     = "a100"
	gpuCount     = 2
	driverRBAC   = "../deploy/driver/rbac.yaml"
	slicePolicy  = "../deploy/driver/resourceslice-policy.yaml"
	gpuClasses   = "../deploy/driver/deviceclasses.yaml"
	migClass3g   = "mig-3g-20gb.dractl.dev"
	migClass2g   = "mig-2g-10gb.dractl.dev"
	migClass1g   = "mig-1g-5gb.dractl.dev"
	failpointEnv = "DRACTL_GPU_DRIVER_FAILPOINT"
)

// buildDriver builds dractl-gpu-driver once per run of the tests.
func buildDriver(t testing.TB) string { return driverBinary.build(t) }

// nodeKubelet is what a driver and the checks need of a node's kubelet:
// the real one of a framework.Node, or framework.Kubelet.
type nodeKubelet interface {
	RegistrationDir() string
	PluginDir(driver string) string
	PreparedClaims() (state.ClaimInfoStateList, error)
}

// gpuNode is a Node with dractl-gpu-driver processes that come and go;
// its directories stay. Its kubelet is a real node's (node), or the
// hand-written DRA manager of framework.Kubelet (fake) for the soak.
type gpuNode struct {
	cp                       *framework.ControlPlane
	name                     string
	node                     *framework.Node
	fake                     *framework.Kubelet
	kubelet                  nodeKubelet
	bin, kubeconfig          string
	stateDir, cdiDir, logDir string
	// backend are the flags choosing the driver's GPUs.
	backend []string

	cmd     *exec.Cmd
	starts  int
	exited  chan struct{}
	exitErr error
}

// newGPUNode is a real node (framework.Node) with the driver's
// credentials and manifests; the driver is started with start. The node
// stops at the end of t.
func newGPUNode(t testing.TB, cp *framework.ControlPlane, name string) *gpuNode {
	t.Helper()
	node := &framework.Node{NodeName: name}
	cp.Start(node)
	t.Cleanup(node.Stop)
	n := &gpuNode{node: node, kubelet: node, stateDir: filepath.Join(node.Dir(), "var-lib-dractl-gpu-driver"), cdiDir: node.CDIDir()}
	n.setUp(t, cp, name)
	return n
}

// startGPUNode starts a control plane with dractl-scheduler
// (startScheduling) and one real node, gpu-node, whose driver has
// published its pool and registered with the kubelet; it returns the
// pool's slices' resource versions by name.
func startGPUNode(t testing.TB) (*framework.ControlPlane, *gpuNode, map[string]string) {
	t.Helper()
	cp := startScheduling(t)
	n := newGPUNode(t, cp, "gpu-node")
	n.start(t, "")
	published := n.published(t)
	n.registered(t)
	return cp, n, published
}

// newFakeGPUNode is a Node with framework.Kubelet, the kubelet's DRA
// manager behind a hand-written pod loop, and no container runtime: the
// soak's nodes, which a real node cannot serve here (e2e/README.md).
func newFakeGPUNode(t *testing.T, cp *framework.ControlPlane, name string) *gpuNode {
	t.Helper()
	// Short: the sockets live beneath it (108 bytes at most).
	root, err := os.MkdirTemp("", "node")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	createNodes(t, cp, name)
	fake := &framework.Kubelet{NodeName: name, RootDir: filepath.Join(root, "kubelet")}
	cp.Start(fake)
	n := &gpuNode{fake: fake, kubelet: fake, stateDir: filepath.Join(root, "driver"), cdiDir: filepath.Join(root, "cdi")}
	n.setUp(t, cp, name)
	return n
}

func (n *gpuNode) setUp(t testing.TB, cp *framework.ControlPlane, name string) {
	t.Helper()
	n.cp, n.name, n.bin, n.logDir = cp, name, buildDriver(t), t.TempDir()
	n.backend = []string{"--gpu-model", gpuModel, fmt.Sprintf("--gpus=%d", gpuCount)}
	sa := cp.ServiceAccountOnNode(t, "dractl-gpu-driver", "dractl-gpu-driver", name)
	cp.Apply(t, driverRBAC, slicePolicy, gpuClasses)
	n.kubeconfig = cp.Kubeconfig(cp.Via(sa))
	t.Cleanup(func() {
		n.stop(t)
		if t.Failed() {
			n.logs(t)
		}
	})
}

// start runs the driver, which kills itself at failpoint when not empty,
// and waits until it serves: both its sockets exist again. On a real node
// the driver's process is part of the node: a Reboot kills it.
func (n *gpuNode) start(t testing.TB, failpoint prepare.Failpoint) {
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
	log, err := os.Create(n.logFile(n.starts))
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
	if n.node != nil {
		if err := n.node.Adopt(n.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
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

func (n *gpuNode) logFile(start int) string {
	return filepath.Join(n.logDir, fmt.Sprintf("driver-%d.log", start))
}

// driverLog is the log of the driver's current (last) start.
func (n *gpuNode) driverLog(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(n.logFile(n.starts))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func exist(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// registered waits until the kubelet has registered the driver: the real
// kubelet's plugin manager says so in its metrics, framework.Kubelet's
// DRA manager has a connection to it.
func (n *gpuNode) registered(t testing.TB) {
	t.Helper()
	waitFor(t, time.Minute, "the driver to register with the kubelet", func(ctx context.Context) (bool, error) {
		if n.fake != nil {
			return n.fake.Registered(gpuDriver), nil
		}
		return n.node.Registered(ctx, gpuDriver)
	})
}

// killed waits for the driver to die of SIGKILL at its failpoint.
func (n *gpuNode) killed(t testing.TB) {
	t.Helper()
	select {
	case <-n.exited:
		n.cmd = nil
		var ee *exec.ExitError
		if !errors.As(n.exitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the driver ended with %v, want SIGKILL", n.exitErr)
		}
	case <-time.After(time.Minute):
		t.Fatal("the driver was not killed")
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

func (n *gpuNode) restart(t testing.TB, failpoint prepare.Failpoint) {
	t.Helper()
	n.stop(t)
	n.start(t, failpoint)
}

// reboot power-cycles the real node with its driver, whose device nodes
// (under /dev on a host, a devtmpfs) go as the node's /run does; the
// driver is started again as its DaemonSet's pod would be once the
// kubelet is back.
func (n *gpuNode) reboot(t testing.TB) {
	t.Helper()
	if err := n.node.Reboot(n.cp.Context()); err != nil {
		t.Fatal(err)
	}
	n.killed(t)
	for _, dev := range []string{filepath.Join(n.stateDir, "gpus", "dev"), filepath.Join(n.stateDir, "mock-root")} {
		if err := os.RemoveAll(dev); err != nil {
			t.Fatal(err)
		}
	}
	n.start(t, "")
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

// gpus are the node's simulated GPUs, read from their directory, not
// from the driver.
func (n *gpuNode) gpus(t testing.TB) *gpu.GPUs {
	t.Helper()
	gpus, err := gpu.New(gpuDriver, n.name, gpuModel, gpuCount, filepath.Join(n.stateDir, "gpus"))
	if err != nil {
		t.Fatal(err)
	}
	return gpus
}

// partitions are the MIG devices on the node.
func (n *gpuNode) partitions(t testing.TB) []prepare.Partition {
	t.Helper()
	ps, err := n.gpus(t).Partitions(context.Background())
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

// checkPrepared checks a real node for its running pods' claims, each of
// devices of the driver: exactly one partition per device, made for the
// claim on the allocated device; one CDI spec and one driver checkpoint
// per claim; the kubelet's checkpoint holds each claim, for its pod, with
// the driver's answer; and each container of the pods sees what the CDI
// devices the kubelet handed containerd promise (checkContainer).
func (n *gpuNode) checkPrepared(t testing.TB, pods ...*corev1.Pod) {
	t.Helper()
	var claims []*resourcev1.ResourceClaim
	wantParts := map[string]types.UID{}
	for _, pod := range pods {
		claim := claimOf(t, n.cp, pod.Name)
		claims = append(claims, claim)
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != gpuDriver || r.Pool != n.name {
				t.Fatalf("claim %s allocated %+v, want devices of %s on %s", claim.Name, r, gpuDriver, n.name)
			}
			wantParts[r.Device] = claim.UID
		}
	}
	parts := n.partitions(t)
	gotParts := map[string]types.UID{}
	for _, p := range parts {
		gotParts[p.Device] = p.Claim
	}
	if len(parts) != len(wantParts) || !maps.Equal(gotParts, wantParts) {
		t.Fatalf("partitions on the node: %+v, want one for each of %v", parts, wantParts)
	}
	var wantSpecs, wantCkpts []string
	for _, c := range claims {
		wantCkpts = append(wantCkpts, string(c.UID)+".json")
		wantSpecs = append(wantSpecs, string(c.UID))
	}
	slices.Sort(wantCkpts)
	if ckpts := list(t, filepath.Join(n.stateDir, "claims")); !slices.Equal(ckpts, wantCkpts) {
		t.Fatalf("driver checkpoints %v, want %v", ckpts, wantCkpts)
	}
	specs := list(t, n.cdiDir)
	if len(specs) != len(claims) {
		t.Fatalf("CDI specs %v, want one for each claim %v", specs, wantSpecs)
	}
	for _, uid := range wantSpecs {
		if !slices.ContainsFunc(specs, func(s string) bool { return strings.Contains(s, uid) }) {
			t.Fatalf("CDI specs %v, none for claim %s", specs, uid)
		}
	}

	prepared, err := n.kubelet.PreparedClaims()
	if err != nil {
		t.Fatal(err)
	}
	if len(prepared) != len(claims) {
		t.Fatalf("the kubelet's checkpoint holds %+v, want the %d claims of %d pods", prepared, len(claims), len(pods))
	}
	for i, pod := range pods {
		c := claims[i]
		info := preparedClaim(prepared, c.UID)
		if info == nil || !info.PodUIDs.Has(string(pod.UID)) {
			t.Fatalf("the kubelet's checkpoint holds %+v, want claim %s of pod %s", prepared, c.UID, pod.UID)
		}
		devices := info.DriverState[gpuDriver].Devices
		results := c.Status.Allocation.Devices.Results
		if len(devices) != len(results) {
			t.Fatalf("the kubelet recorded %+v for %+v", devices, results)
		}
		for j, d := range devices {
			if d.PoolName != n.name || d.DeviceName != results[j].Device || !slices.Equal(d.RequestNames, []string{results[j].Request}) || len(d.CDIDeviceIDs) == 0 {
				t.Fatalf("the kubelet recorded %+v for %+v", d, results[j])
			}
		}
		for _, ctr := range pod.Spec.Containers {
			seen := n.checkContainer(t, pod, ctr.Name, c)
			for _, r := range results {
				prefix := gpu.EnvPrefix(r.Device)
				if seen.env[prefix+"UUID"] != partitionOf(parts, r.Device).ID || seen.env[prefix+"CLAIM"] != string(c.UID) {
					t.Errorf("container %s/%s sees device %s as %s of claim %s, the node has %+v", pod.Name, ctr.Name, r.Device,
						seen.env[prefix+"UUID"], seen.env[prefix+"CLAIM"], partitionOf(parts, r.Device))
				}
			}
		}
	}
}

func preparedClaim(l state.ClaimInfoStateList, uid types.UID) *state.ClaimInfoState {
	for i := range l {
		if l[i].ClaimUID == uid {
			return &l[i]
		}
	}
	return nil
}

func partitionOf(parts []prepare.Partition, device string) prepare.Partition {
	for _, p := range parts {
		if p.Device == device {
			return p
		}
	}
	return prepare.Partition{}
}

// deviceScript prints what a container sees of its devices, a fact a
// line: "dev <path> <major>:<minor>" (hexadecimal) for each character
// device named /dev/nvidia*, "env <name>=<value>" for each DRACTL_GPU_*
// and NVIDIA_* variable, "mount <path> <contents>" for each file of
// /var/run/dractl-gpu (the mock's MIG device records).
const deviceScript = `for d in /dev/nvidia* /dev/nvidia-caps/*; do [ -c "$d" ] && echo "dev $d $(stat -c '%t:%T' "$d")"; done
env | grep -E '^(DRACTL_GPU_|NVIDIA_)' | sort | sed 's/^/env /'
for f in /var/run/dractl-gpu/*; do [ -f "$f" ] && echo "mount $f $(cat "$f")"; done`

// devices is what a container saw (deviceScript) or was promised.
type devices struct {
	// nodes are device numbers ("195:0") by path, env values by name,
	// mounts contents by path.
	nodes, env, mounts map[string]string
}

func (d devices) String() string {
	return fmt.Sprintf("device nodes %v\nenvironment %v\nmounts %v", d.nodes, d.env, d.mounts)
}

func parseDevices(t testing.TB, out string) devices {
	t.Helper()
	d := devices{nodes: map[string]string{}, env: map[string]string{}, mounts: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "dev":
			path, num, _ := strings.Cut(rest, " ")
			major, minor, _ := strings.Cut(num, ":")
			ma, err1 := strconv.ParseInt(major, 16, 64)
			mi, err2 := strconv.ParseInt(minor, 16, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("device line %q", line)
			}
			d.nodes[path] = fmt.Sprintf("%d:%d", ma, mi)
		case "env":
			k, v, _ := strings.Cut(rest, "=")
			d.env[k] = v
		case "mount":
			path, contents, _ := strings.Cut(rest, " ")
			d.mounts[path] = contents
		}
	}
	return d
}

// cdiIDs are the CDI devices the kubelet handed containerd for a
// container that uses the whole claim: the driver's answer in the
// kubelet's checkpoint.
func (n *gpuNode) cdiIDs(t testing.TB, claim types.UID) []string {
	t.Helper()
	prepared, err := n.kubelet.PreparedClaims()
	if err != nil {
		t.Fatal(err)
	}
	info := preparedClaim(prepared, claim)
	if info == nil {
		t.Fatalf("the kubelet's checkpoint has no claim %s: %+v", claim, prepared)
	}
	var ids []string
	for _, d := range info.DriverState[gpuDriver].Devices {
		ids = append(ids, d.CDIDeviceIDs...)
	}
	return ids
}

// promised is what CDI devices give a container, as a runtime resolves
// them from the node's spec files: injected into an OCI spec, device
// nodes with the numbers of the host's nodes, mounts with the host
// files' contents.
func (n *gpuNode) promised(t testing.TB, ids []string) devices {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(n.cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		t.Fatalf("injecting %v: %v (unresolved %v)", ids, err, unresolved)
	}
	d := devices{nodes: map[string]string{}, env: map[string]string{}, mounts: map[string]string{}}
	for _, dn := range spec.Linux.Devices {
		d.nodes[dn.Path] = fmt.Sprintf("%d:%d", dn.Major, dn.Minor)
	}
	for _, e := range spec.Process.Env {
		k, v, _ := strings.Cut(e, "=")
		d.env[k] = v
	}
	for _, m := range spec.Mounts {
		data, err := os.ReadFile(m.Source)
		if err != nil {
			t.Fatal(err)
		}
		d.mounts[m.Destination] = strings.TrimSpace(string(data))
	}
	return d
}

// checkContainer checks that a container's own output, read through
// kube-apiserver, shows exactly the device nodes, environment and mounts
// that the CDI devices of its claims promise, and returns what it saw.
func (n *gpuNode) checkContainer(t testing.TB, pod *corev1.Pod, container string, claims ...*resourcev1.ResourceClaim) devices {
	t.Helper()
	var ids []string
	for _, c := range claims {
		ids = append(ids, n.cdiIDs(t, c.UID)...)
	}
	want := n.promised(t, ids)
	got := parseDevices(t, waitLog(t, n.cp, pod.Name, container, "done"))
	if len(want.nodes) == 0 || len(want.env) == 0 {
		t.Fatalf("CDI devices %v promise no device node or no environment: %v", ids, want)
	}
	if !maps.Equal(got.nodes, want.nodes) || !maps.Equal(got.env, want.env) || !maps.Equal(got.mounts, want.mounts) {
		t.Fatalf("container %s/%s sees\n%v\nits CDI devices %v promise\n%v", pod.Name, container, got, ids, want)
	}
	return got
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

// waitLog waits until a container's output has a line ending the report
// its script prints, and returns the output.
func waitLog(t testing.TB, cp *framework.ControlPlane, pod, container, last string) string {
	t.Helper()
	var out string
	waitFor(t, 2*time.Minute, "the output of "+pod+"/"+container, func(ctx context.Context) (bool, error) {
		data, err := cp.Client.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		out = string(data)
		return err == nil && strings.Contains(out, last), nil
	})
	return out
}

// shellContainer runs a busybox shell script, then waits for SIGTERM so
// that deleting its pod takes no grace period.
func shellContainer(name, script string) corev1.Container {
	return corev1.Container{
		Name: name, Image: framework.BusyboxImage,
		Command: []string{"sh", "-c", script + "\necho done\ntrap 'exit 0' TERM\nwhile true; do sleep 1; done"},
	}
}

// devicePod is a pod on the real node whose containers (each using all
// the pod's claims, from the templates given) print what they see of
// their devices (deviceScript) and wait.
func devicePod(name, profile, node string, templates []string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			SchedulerName: profile, HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](5),
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
		},
	}
	var uses []corev1.ResourceClaim
	for i, tmpl := range templates {
		c := fmt.Sprintf("gpu-%d", i)
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimTemplateName: ptr.To(tmpl)})
		uses = append(uses, corev1.ResourceClaim{Name: c})
	}
	for _, c := range containers {
		ctr := shellContainer(c, deviceScript)
		ctr.Resources.Claims = uses
		pod.Spec.Containers = append(pod.Spec.Containers, ctr)
	}
	return pod
}

// running waits until the pod runs with every container ready and
// returns it.
func running(t testing.TB, cp *framework.ControlPlane, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, 2*time.Minute, "pod "+name+" to run", func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		pod = p
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.ContainersReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return len(p.Status.Conditions) == 0, nil // framework.Kubelet reports the phase only
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

// kubeletEvent waits for the kubelet's Event of a reason on a pod whose
// message contains want, and returns the message.
func kubeletEvent(t testing.TB, cp *framework.ControlPlane, pod types.UID, name, reason, want string) string {
	t.Helper()
	var msg string
	waitFor(t, 2*time.Minute, fmt.Sprintf("a %s event of the kubelet on pod %s saying %q", reason, name, want), func(ctx context.Context) (bool, error) {
		sel := fields.Set{"involvedObject.uid": string(pod), "reason": reason, "source": "kubelet"}
		l, err := cp.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
		if err != nil {
			return false, err
		}
		for _, e := range l.Items {
			if strings.Contains(e.Message, want) {
				msg = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	return msg
}

// failedPrepare waits for the kubelet's Event that preparing the pod's
// claims failed.
func failedPrepare(t testing.TB, cp *framework.ControlPlane, pod types.UID, name string) string {
	t.Helper()
	return kubeletEvent(t, cp, pod, name, "FailedPrepareDynamicResources", "")
}

func podUID(t testing.TB, cp *framework.ControlPlane, name string) types.UID {
	t.Helper()
	p, err := cp.Client.CoreV1().Pods("default").Get(cp.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.UID
}

// noContainers checks that containerd has no container of the pod: a pod
// whose claims are not prepared gets none, not even its sandbox.
func (n *gpuNode) noContainers(t testing.TB, pod types.UID) {
	t.Helper()
	ids, err := n.node.PodContainers(pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 0 {
		t.Fatalf("containerd has containers %v of pod %s, whose claims are not prepared", ids, pod)
	}
}

// containerIDs are the IDs of a pod's containers and their restart
// counts, by container name.
func containerIDs(t testing.TB, cp *framework.ControlPlane, name string) map[string]string {
	t.Helper()
	p, err := cp.Client.CoreV1().Pods("default").Get(cp.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range p.Status.ContainerStatuses {
		out[s.Name] = fmt.Sprintf("%s (restarts %d)", s.ContainerID, s.RestartCount)
	}
	return out
}

// TestKubeletPreparesMIGClaims is the node side of DRA on a real node:
// the driver publishes its pool, pods with MIG claims are scheduled by
// dractl-scheduler, the kubelet has the driver prepare them over its
// socket (the MIG devices are created, the CDI specs written), containerd
// gives the containers what the CDI devices promise and each container's
// own output shows it: one MIG device; two containers sharing a claim
// seeing the same device; a claim of two MIG devices, both seen. Deleting
// a pod has the kubelet unprepare its claims (the MIG devices and CDI
// specs go away) and the resourceclaim controller release them, while the
// published slices stay as they were.
func TestKubeletPreparesMIGClaims(t *testing.T) {
	cp, n, slicesBefore := startGPUNode(t)
	createTemplate(t, cp, "mig-3g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass3g, 1)}})
	createTemplate(t, cp, "two-1g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass1g, 2)}})

	for _, tc := range []struct {
		name       string
		template   string
		containers []string
	}{
		{"one-device", "mig-3g", []string{"c"}},
		{"shared-by-two-containers", "mig-3g", []string{"first", "second"}},
		{"two-devices", "two-1g", []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			createPod(t, cp, devicePod(tc.name, dractlProfile, n.name, []string{tc.template}, tc.containers...))
			pod := running(t, cp, tc.name)
			claim := claimOf(t, cp, tc.name)
			n.checkPrepared(t, pod)
			var seen []devices
			for _, c := range tc.containers {
				seen = append(seen, n.checkContainer(t, pod, c, claim))
			}
			t.Logf("container %s of %s sees:\n%v", tc.containers[0], tc.name, seen[0])
			if d := seen[len(seen)-1]; fmt.Sprint(d) != fmt.Sprint(seen[0]) {
				t.Errorf("containers sharing claim %s see different devices:\n%v\nand\n%v", claim.Name, seen[0], d)
			}
			results := claim.Status.Allocation.Devices.Results
			if want := map[string]int{"mig-3g": 1, "two-1g": 2}[tc.template]; len(results) != want {
				t.Fatalf("allocated %+v, want %d devices", results, want)
			}
			// Each MIG device: its GPU's node and its capability node.
			if nodes := len(seen[0].nodes); nodes < 2 || nodes > 2*len(results) {
				t.Errorf("the container sees device nodes %v for %d MIG devices", seen[0].nodes, len(results))
			}

			deleteAndWait(t, cp, pod)
			n.checkClean(t)
			released(t, cp, claim)
		})
	}
	if after := n.published(t); !maps.Equal(after, slicesBefore) {
		t.Errorf("the driver's slices changed: %v, were %v", after, slicesBefore)
	}
}

// TestKubeletFailedPrepare: a MIG device the GPUs refuse to create (a
// whole-GPU instance someone made outside the driver holds every GPU) is
// the driver's error, which the kubelet reports as its own
// FailedPrepareDynamicResources Event on the pod, starting no container
// of it, not even the sandbox; once the instances are gone, the
// kubelet's retry prepares the claim and the pod runs with its device.
func TestKubeletFailedPrepare(t *testing.T) {
	cp, n, _ := startGPUNode(t)
	createTemplate(t, cp, "mig-3g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass3g, 1)}})

	gpus, ctx := n.gpus(t), cp.Context()
	var foreign []prepare.Partition
	for i := range gpuCount {
		p, err := gpus.CreatePartition(ctx, "someone-else", prepare.AllocatedDevice{Pool: n.name, Device: migtables.GPUDeviceName(i)})
		if err != nil {
			t.Fatal(err)
		}
		foreign = append(foreign, p)
	}
	pod := createPod(t, cp, devicePod("blocked", dractlProfile, n.name, []string{"mig-3g"}, "c"))
	msg := kubeletEvent(t, cp, pod.UID, pod.Name, "FailedPrepareDynamicResources", "insufficient resources on GPU")
	t.Logf("the kubelet's event: %s", msg)
	n.noContainers(t, pod.UID)

	for _, p := range foreign {
		if err := gpus.DestroyPartition(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	pod = running(t, cp, pod.Name)
	n.checkPrepared(t, pod)
	deleteAndWait(t, cp, pod)
	n.checkClean(t)
}

// TestDriverCrashConverges kills dractl-gpu-driver (SIGKILL, the real
// binary) at each step of prepare and of unprepare while the kubelet of a
// real node calls it for a pod, then starts it again: the kubelet's
// retries converge on the pod running with its claim prepared exactly
// once (one MIG device, one CDI spec, one checkpoint, the kubelet's
// record matching the driver's, the container seeing its device), resp.
// on the pod gone and nothing left. While the driver is dead mid-prepare,
// the pod has the kubelet's FailedPrepareDynamicResources Event and no
// container at all. Pods go through the stock scheduler profile here.
func TestDriverCrashConverges(t *testing.T) {
	cp := startScheduling(t)
	n := newGPUNode(t, cp, "gpu-node")
	n.start(t, "")
	slicesBefore := n.published(t)
	createTemplate(t, cp, "mig-2g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass2g, 1)}})

	for i, fp := range prepare.PrepareFailpoints {
		t.Run("prepare/"+string(fp), func(t *testing.T) {
			n.restart(t, fp)
			name := fmt.Sprintf("prepare-%d", i)
			createClaimPod(t, cp, name, stockProfile, "mig-2g", "")
			n.killed(t)
			uid := podUID(t, cp, name)
			failedPrepare(t, cp, uid, name)
			n.noContainers(t, uid)

			n.start(t, "")
			pod := running(t, cp, name)
			claim := claimOf(t, cp, name)
			n.checkPrepared(t, pod)
			deleteAndWait(t, cp, pod)
			n.checkClean(t)
			released(t, cp, claim)
		})
	}
	for i, fp := range prepare.UnprepareFailpoints {
		t.Run("unprepare/"+string(fp), func(t *testing.T) {
			if n.cmd == nil {
				n.start(t, "")
			}
			name := fmt.Sprintf("unprepare-%d", i)
			createClaimPod(t, cp, name, stockProfile, "mig-2g", "")
			pod := running(t, cp, name)
			claim := claimOf(t, cp, name)
			n.checkPrepared(t, pod)

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

// preparesLogged counts the claims the driver's current process really
// prepared (created partitions for), from its log.
func (n *gpuNode) preparesLogged(t testing.TB) int {
	return strings.Count(n.driverLog(t), `"Prepared claim"`)
}

// TestNodeRestarts: with pods running on a real node, the kubelet is
// restarted (its pods keep their containers and devices, and no claim is
// prepared a second time: the driver answers the kubelet's new prepare
// from its checkpoint), then the driver (the kubelet registers the new
// process, which prepares a new pod's claim). Then a node broken two
// ways: a prepared claim's CDI spec damaged, which containerd refuses
// when the pod's container restarts (the kubelet's Failed Event with
// containerd's error, and no container made), until a driver restart
// writes it again from its checkpoint; and the GPUs' device nodes gone
// from the host, which fails a new pod's prepare (the kubelet's
// FailedPrepareDynamicResources Event with the driver's error naming the
// node, and no container of the pod, not even its sandbox), until a
// driver restart makes them again and the kubelet's retry prepares it.
func TestNodeRestarts(t *testing.T) {
	cp, n, _ := startGPUNode(t)
	createTemplate(t, cp, "mig-2g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass2g, 1)}})
	createPod(t, cp, devicePod("first", dractlProfile, n.name, []string{"mig-2g"}, "c"))
	first := running(t, cp, "first")
	n.checkPrepared(t, first)
	parts, ids := n.partitions(t), containerIDs(t, cp, "first")

	t.Run("kubelet", func(t *testing.T) {
		prepares := n.preparesLogged(t)
		if err := n.node.RestartKubelet(cp.Context()); err != nil {
			t.Fatal(err)
		}
		createPod(t, cp, devicePod("second", dractlProfile, n.name, []string{"mig-2g"}, "c"))
		second := running(t, cp, "second")
		if got := containerIDs(t, cp, "first"); !maps.Equal(got, ids) {
			t.Errorf("the first pod's containers %v, were %v: a kubelet restart must leave them running", got, ids)
		}
		// The new kubelet asked again for the first pod's claim, which
		// the driver answered from its checkpoint: one prepare more,
		// for the second pod's claim.
		if got := n.preparesLogged(t); got != prepares+1 {
			t.Errorf("the driver prepared %d claims since the kubelet restarted, want 1 (the new pod's)", got-prepares)
		}
		if got := n.partitions(t); !slices.Contains(got, parts[0]) || len(got) != 2 {
			t.Errorf("partitions %+v, want %+v kept and one new", got, parts)
		}
		n.checkPrepared(t, running(t, cp, "first"), second)
		deleteAndWait(t, cp, second)
	})

	t.Run("driver", func(t *testing.T) {
		n.restart(t, "")
		n.registered(t)
		createPod(t, cp, devicePod("third", dractlProfile, n.name, []string{"mig-2g"}, "c"))
		third := running(t, cp, "third")
		if got := containerIDs(t, cp, "first"); !maps.Equal(got, ids) {
			t.Errorf("the first pod's containers %v, were %v: a driver restart must leave them running", got, ids)
		}
		n.checkPrepared(t, running(t, cp, "first"), third)
		deleteAndWait(t, cp, third)
	})

	claim := claimOf(t, cp, "first")
	t.Run("damaged-cdi-spec", func(t *testing.T) {
		before := containerIDs(t, cp, "first")
		spec := filepath.Join(n.cdiDir, list(t, n.cdiDir)[0])
		if err := os.WriteFile(spec, []byte("cdiVersion: [\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		pod, err := cp.Client.CoreV1().Pods("default").Get(cp.Context(), "first", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.node.KillContainer(pod.Status.ContainerStatuses[0].ContainerID); err != nil {
			t.Fatal(err)
		}
		msg := kubeletEvent(t, cp, pod.UID, pod.Name, "Failed", "CDI device injection failed: unresolvable CDI devices "+n.cdiIDs(t, claim.UID)[0])
		t.Logf("the kubelet's event: %s", msg)
		if ids, err := n.node.PodContainers(pod.UID); err != nil || len(ids) != 2 {
			t.Fatalf("containerd has %v (%v) of the pod: want its sandbox and the killed container, no new one", ids, err)
		}

		n.restart(t, "")
		waitFor(t, 2*time.Minute, "the container to run again", func(ctx context.Context) (bool, error) {
			got := containerIDs(t, cp, "first")
			return got["c"] != before["c"] && !strings.Contains(got["c"], "(restarts 0)"), nil
		})
		n.checkPrepared(t, running(t, cp, "first"))
	})

	t.Run("missing-device-node", func(t *testing.T) {
		dev := n.gpus(t).DevDir()
		for gpu := range gpuCount {
			if err := os.Remove(filepath.Join(dev, fmt.Sprintf("nvidia%d", gpu))); err != nil {
				t.Fatal(err)
			}
		}
		pod := createPod(t, cp, devicePod("fourth", dractlProfile, n.name, []string{"mig-2g"}, "c"))
		msg := kubeletEvent(t, cp, pod.UID, pod.Name, "FailedPrepareDynamicResources", "is not on this host")
		t.Logf("the kubelet's event: %s", msg)
		n.noContainers(t, pod.UID)

		// The driver makes the simulated GPUs' device nodes at start.
		n.restart(t, "")
		fourth := running(t, cp, "fourth")
		n.checkPrepared(t, running(t, cp, "first"), fourth)
		deleteAndWait(t, cp, fourth)
	})
	deleteAndWait(t, cp, first)
	n.checkClean(t)
	released(t, cp, claim)
}

// TestNodeReboot power-cycles one of two real nodes with pods running:
// the kubelet, containerd, the shims, the containers and the driver are
// killed at once, the node's /run (containerd's state, the CDI specs) and
// the GPUs' device nodes are lost, and everything starts again over the
// persistent directories. The pods come back running on their node with
// new containers that see their devices, the driver having written the
// CDI specs again from its checkpoints; no MIG device is lost, leaked or
// doubled; the other node's pod is untouched.
func TestNodeReboot(t *testing.T) {
	cp := startScheduling(t)
	a, b := newGPUNode(t, cp, "node-a"), newGPUNode(t, cp, "node-b")
	for _, n := range []*gpuNode{a, b} {
		n.start(t, "")
		n.published(t)
		n.registered(t)
	}
	createTemplate(t, cp, "mig-3g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass3g, 1)}})
	createTemplate(t, cp, "two-1g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass1g, 2)}})
	createPod(t, cp, devicePod("a-one", dractlProfile, a.name, []string{"mig-3g"}, "c"))
	createPod(t, cp, devicePod("a-two", dractlProfile, a.name, []string{"two-1g"}, "first", "second"))
	createPod(t, cp, devicePod("b-one", dractlProfile, b.name, []string{"mig-3g"}, "c"))
	podsA := []*corev1.Pod{running(t, cp, "a-one"), running(t, cp, "a-two")}
	podB := running(t, cp, "b-one")
	a.checkPrepared(t, podsA...)
	b.checkPrepared(t, podB)
	partsA, idsB := a.partitions(t), containerIDs(t, cp, "b-one")
	idsA := map[string]map[string]string{}
	for _, p := range podsA {
		idsA[p.Name] = containerIDs(t, cp, p.Name)
	}

	a.reboot(t)
	if a.node.Boots() != 2 {
		t.Fatalf("node-a booted %d times, want 2", a.node.Boots())
	}
	if !strings.Contains(a.driverLog(t), "rewrittenSpecs=2") {
		t.Errorf("the driver did not write both claims' CDI specs again at start:\n%s", a.driverLog(t))
	}
	for _, p := range podsA {
		waitFor(t, 3*time.Minute, "pod "+p.Name+" to come back with new containers", func(ctx context.Context) (bool, error) {
			got := containerIDs(t, cp, p.Name)
			for c, before := range idsA[p.Name] {
				if got[c] == before || strings.Contains(got[c], "(restarts 0)") {
					return false, nil
				}
			}
			return true, nil
		})
	}
	podsA = []*corev1.Pod{running(t, cp, "a-one"), running(t, cp, "a-two")}
	a.checkPrepared(t, podsA...)
	if got := a.partitions(t); fmt.Sprint(got) != fmt.Sprint(partsA) {
		t.Errorf("node-a's MIG devices after the reboot: %+v, were %+v", got, partsA)
	}
	if got := containerIDs(t, cp, "b-one"); !maps.Equal(got, idsB) {
		t.Errorf("node-b's pod has containers %v, had %v: the reboot of node-a reached it", got, idsB)
	}
	b.checkPrepared(t, podB)

	for _, p := range append(podsA, podB) {
		deleteAndWait(t, cp, p)
	}
	a.checkClean(t)
	b.checkClean(t)
}

// TestKubeletStatusWritesSurviveFaults tests framework.Kubelet, the
// soak's kubelet: it reaches the API server through a proxy that fails
// every write for a while (conflicts, 429s, timeouts, answers lost after
// the write); once writes pass again, a pod bound to its node is reported
// Running and a deleted pod is removed, as the kubelet's status manager
// retries until its status is stored.
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
