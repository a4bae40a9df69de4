package framework

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
)

// Node is a real Kubernetes node on this machine: its own containerd
// v2 (ContainerdVersion) running containers with Debian's runc, and the
// real kubelet (k8s.io/kubernetes/cmd/kubelet of this module's
// k8s.io/kubernetes), registered as NodeName with kube-apiserver. Pods
// bound to it really run: the kubelet's pod workers, status manager,
// volume manager and DRA manager act, containerd resolves the CDI devices
// the kubelet hands it from the specs drivers write into CDIDir, and a
// container's output is read through kube-apiserver's pod log endpoint
// (kube-apiserver → kubelet → containerd).
//
// What it takes on this machine, and how each part is configured, is in
// nodeconfig.go; in short:
//   - files: a directory of its own (Dir), with RunDir as its /run;
//   - network: pods use the host network (no CNI); the Node's address
//     (Address) is on a veth pair whose other end lives in a network
//     namespace made for the node (nodenet.go); the kubelet serves there,
//     and kube-apiserver reaches it there with a client certificate
//     (nodepki.go);
//   - mounts: containerd and the kubelet share a mount namespace of the
//     node's (the kubelet's and runc's mounts stay in it, and
//     /run/containerd, where containerd puts its shims' sockets whatever
//     its configuration says, is a tmpfs of the node's), which goes away
//     with the node's processes;
//   - processes: all in a cgroup of the node's, the pods' beneath it
//     (nodecgroup.go); Reboot kills them all at once;
//   - images: PauseImage (the sandbox), BusyboxImage and Images, built
//     from files and imported at the first boot, never pulled.
//
// Drivers run beside it as the test starts them, or as a DaemonSet's pods
// on it (the chart's, with these directories as its values): they
// register through RegistrationDir and serve in PluginDir, write CDI
// specs into CDIDir, and a process a test started is part of the node for
// Reboot once Adopt is called with its process ID.
//
// Start it with ControlPlane.Start (it is a Component) or
// Options.Components; it returns once the Node is Ready, having removed
// the not-ready taint kube-apiserver gave the new Node, as the node
// lifecycle controller would. It stops at the end of the test that
// started the control plane, or at Stop.
type Node struct {
	// NodeName is the Node's name (--hostname-override) and its
	// kubernetes.io/hostname label.
	NodeName string
	// Images are OCI layout tarballs (internal/ociimage.WriteFile)
	// imported into the node's containerd at its first boot, beside
	// PauseImage and BusyboxImage.
	Images []string

	cp         *ControlPlane
	tools      *nodeTools
	layout     nodeLayout
	net        *nodeNet
	cgroup     *nodeCgroup
	kubeconfig string

	mu      sync.Mutex
	stopped bool
	starts  map[string]int
	holder  *nodeProc
	ctrd    *nodeProc
	kubelet *nodeProc
	// boots counts the node's boots (1 after Start).
	boots int
}

// nodeSeq numbers the nodes of this test process.
var nodeSeq atomic.Int32

func (n *Node) Name() string { return "node " + n.NodeName }

// Dir holds everything of the node (see nodeLayout).
func (n *Node) Dir() string { return n.layout.dir }

// Address is the Node's InternalIP.
func (n *Node) Address() string { return n.net.ip.String() }

// RootDir is the kubelet's --root-dir (/var/lib/kubelet).
func (n *Node) RootDir() string { return n.layout.kubeletRoot() }

// RunDir is the node's /run: Reboot empties it.
func (n *Node) RunDir() string { return n.layout.run() }

// CDIDir is the directory of CDI specs containerd reads
// (cdi_spec_dirs), in RunDir as /var/run/cdi is on a node: a driver
// writes its specs there, and a Reboot loses them.
func (n *Node) CDIDir() string { return n.layout.cdi() }

// ManifestDir is the kubelet's staticPodPath.
func (n *Node) ManifestDir() string { return n.layout.manifests() }

// RegistrationDir is where drivers put their registration sockets (the
// kubelet's plugins_registry).
func (n *Node) RegistrationDir() string { return filepath.Join(n.RootDir(), "plugins_registry") }

// PluginDir is where a driver keeps its DRA socket.
func (n *Node) PluginDir(driver string) string { return filepath.Join(n.RootDir(), "plugins", driver) }

// LogDir holds the logs of the node's processes: kubelet-<boot>.log,
// containerd-<boot>.log (a restarted kubelet starts the next number).
func (n *Node) LogDir() string { return n.layout.processLogs() }

// Boots is how many times the node has booted: 1 after Start, one more
// after each Reboot.
func (n *Node) Boots() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.boots
}

// PreparedClaims reads the kubelet's DRA checkpoint.
func (n *Node) PreparedClaims() (state.ClaimInfoStateList, error) {
	return readDRACheckpoint(n.RootDir())
}

func (n *Node) Start(ctx context.Context, cp *ControlPlane) error {
	if n.NodeName == "" {
		return errors.New("NodeName must be set")
	}
	tools, err := findNodeTools()
	if err != nil {
		return err
	}
	n.cp, n.tools, n.starts = cp, tools, map[string]int{}
	seq := int(nodeSeq.Add(1))
	// Short: unix sockets live beneath it (107 bytes at most).
	dir, err := os.MkdirTemp("", "node")
	if err != nil {
		return err
	}
	n.layout = nodeLayout{dir: dir}
	cp.tb.Cleanup(n.Stop)
	for _, d := range n.layout.persistentDirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if n.net, err = newNodeNet(seq); err != nil {
		return err
	}
	if n.cgroup, err = newNodeCgroup(seq); err != nil {
		return err
	}
	cert, key, err := cp.kubeletPKI.servingCert(n.layout.etc(), n.NodeName, n.net.ip)
	if err != nil {
		return err
	}
	n.kubeconfig = cp.Kubeconfig(cp.NodeConfig(n.NodeName))
	if err := n.layout.writeConfigs(n, tools, cert, key); err != nil {
		return err
	}
	if err := allowKubeletClient(ctx, cp); err != nil {
		return err
	}
	var pubErr error
	cp.rootCAOnce.Do(func() { pubErr = RootCAPublisher{}.Start(cp.ctx, cp) })
	if pubErr != nil {
		return fmt.Errorf("starting %s: %w", RootCAPublisher{}.Name(), pubErr)
	}
	cp.tb.Logf("node %s: address %s, directory %s, cgroup %s", n.NodeName, n.net.ip, dir, n.cgroup.path)
	if err := n.boot(ctx); err != nil {
		return err
	}
	return n.ready(ctx)
}

// allowKubeletClient lets kube-apiserver's kubelet client certificate
// use every kubelet API, as kubeadm binds it.
func allowKubeletClient(ctx context.Context, cp *ControlPlane) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dractl-e2e:" + kubeletClientUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}},
	}
	_, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// nodeProc is one process of the node.
type nodeProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

func (p *nodeProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// spawn starts a process of the node, in the node's mount namespace
// unless it is the process that holds it, in the node's cgroup, logging
// to LogDir.
func (n *Node) spawn(name string, stdout *os.File, args ...string) (*nodeProc, error) {
	n.starts[name]++
	p := &nodeProc{name: name, done: make(chan struct{}), log: filepath.Join(n.LogDir(), fmt.Sprintf("%s-%d.log", name, n.starts[name]))}
	log, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	if n.holder != nil {
		args = append([]string{"nsenter", "--target", strconv.Itoa(n.holder.cmd.Process.Pid), "--mount", "--"}, args...)
	}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if stdout != nil {
		p.cmd.Stdout = stdout
	}
	// The node's processes die with the test process, whatever ends it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		log.Close()
		close(p.done)
	}()
	if err := n.cgroup.join(p.cmd.Process.Pid); err != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
		return nil, err
	}
	return p, nil
}

// boot starts the node: the holder of its mount namespace, containerd
// (importing the images at the first boot) and the kubelet.
func (n *Node) boot(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range n.layout.runDirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// The node's mount namespace is held by a process that does nothing
	// else; the tmpfs on /run/containerd needs the directory on the
	// machine.
	if err := os.MkdirAll("/run/containerd", 0o711); err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	n.holder = nil
	holder, err := n.spawn("mounts", w, "unshare", "--mount", "--propagation", "slave", "--",
		"sh", "-c", "mount -t tmpfs -o mode=0711 node-run-containerd /run/containerd && echo ready && exec sleep infinity")
	w.Close()
	if err != nil {
		r.Close()
		return err
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if line != "ready\n" {
		<-holder.done
		return fmt.Errorf("making the node's mount namespace (unshare --mount, mount -t tmpfs on /run/containerd) failed: %v: %s", holder.err, tail(holder.log, 2000))
	}
	n.holder = holder

	if n.ctrd, err = n.spawn("containerd", nil, n.tools.containerd, "--config", n.layout.containerdConfigFile()); err != nil {
		return err
	}
	if err := n.until(ctx, n.ctrd, time.Minute, func() bool {
		_, err := n.ctrLocked("version")
		return err == nil
	}); err != nil {
		return fmt.Errorf("containerd did not serve: %w", err)
	}
	if n.boots == 0 {
		for _, img := range append(append([]string{}, n.tools.images...), n.Images...) {
			if out, err := n.ctrLocked("images", "import", img); err != nil {
				return fmt.Errorf("importing %s into the node's containerd: %w: %s", img, err, out)
			}
		}
	}
	if err := n.startKubelet(ctx); err != nil {
		return err
	}
	n.boots++
	return nil
}

// startKubelet starts the kubelet and waits until it serves on the
// node's address.
func (n *Node) startKubelet(ctx context.Context) error {
	var err error
	if n.kubelet, err = n.spawn("kubelet", nil, append([]string{n.tools.kubelet}, n.layout.kubeletArgs(n)...)...); err != nil {
		return err
	}
	addr := net.JoinHostPort(n.Address(), "10250")
	if err := n.until(ctx, n.kubelet, 2*time.Minute, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
		return fmt.Errorf("the kubelet did not serve on %s: %w", addr, err)
	}
	return nil
}

// until polls cond until it holds, p exits, or the timeout passes.
func (n *Node) until(ctx context.Context, p *nodeProc, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if p.exited() {
			return fmt.Errorf("%s exited: %v; its log ends:\n%s", p.name, p.err, tail(p.log, 4000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v; its log ends:\n%s", p.name, timeout, tail(p.log, 4000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// ready waits until the Node is Ready and removes the not-ready taint
// kube-apiserver's admission gave it at registration, as the node
// lifecycle controller does once its kubelet reports Ready.
func (n *Node) ready(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if n.kubelet.exited() {
			return false, fmt.Errorf("the kubelet exited: %v", n.kubelet.err)
		}
		node, err := n.cp.Client.CoreV1().Nodes().Get(ctx, n.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = "not registered"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		ready := false
		last = "no Ready condition"
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				ready = c.Status == corev1.ConditionTrue
			}
		}
		if !ready {
			return false, nil
		}
		var taints []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				taints = append(taints, t)
			}
		}
		if len(taints) == len(node.Spec.Taints) {
			return true, nil
		}
		node.Spec.Taints = taints
		_, err = n.cp.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return false, client409(err)
	})
	if err != nil {
		return fmt.Errorf("node %s is not Ready (%s): %w; the kubelet's log ends:\n%s", n.NodeName, last, err, tail(n.kubelet.log, 6000))
	}
	return nil
}

// client409 makes nil of a conflict, to be retried.
func client409(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// Ctr runs ctr against the node's containerd, in the k8s.io namespace
// (the CRI's), and returns its output (with its errors when it fails).
func (n *Node) Ctr(args ...string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ctrLocked(args...)
}

func (n *Node) ctrLocked(args ...string) (string, error) {
	if n.holder == nil || n.holder.exited() {
		return "", errors.New("the node is down")
	}
	cmd := exec.Command("nsenter", append([]string{"--target", strconv.Itoa(n.holder.cmd.Process.Pid), "--mount", "--",
		n.tools.ctr, "--address", n.layout.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		// ctr warns on stderr (cgroup v1 is deprecated) even when it
		// succeeds: its errors matter only when it fails.
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// Adopt makes a process started by the test (a driver) part of the
// node: it dies at Reboot and at Stop.
func (n *Node) Adopt(pid int) error { return n.cgroup.join(pid) }

// RestartKubelet stops the kubelet (SIGTERM, as a service manager
// restarting it does) and starts it again; pods and containers keep
// running meanwhile. It returns once the new kubelet serves.
func (n *Node) RestartKubelet(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.kubelet != nil && !n.kubelet.exited() {
		_ = n.kubelet.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.kubelet.done:
		case <-time.After(30 * time.Second):
			_ = n.kubelet.cmd.Process.Kill()
			<-n.kubelet.done
		}
	}
	return n.startKubelet(ctx)
}

// Reboot is a power cut and a boot: every process of the node (the
// kubelet, containerd, its shims and containers, adopted drivers) is
// killed at once, RunDir is emptied as a tmpfs /run is, the mount
// namespace goes away with its mounts; then containerd and the kubelet
// start again over the same persistent directories (containerd's root,
// the kubelet's root with its checkpoints, the drivers' state), as a
// node's services do at boot. It returns once the kubelet serves; its
// pods come back as the kubelet and its drivers bring them back.
func (n *Node) Reboot(ctx context.Context) error {
	n.mu.Lock()
	if err := n.powerOff(); err != nil {
		n.mu.Unlock()
		return err
	}
	if err := os.RemoveAll(n.layout.run()); err != nil {
		n.mu.Unlock()
		return fmt.Errorf("emptying the node's /run: %w", err)
	}
	n.mu.Unlock()
	return n.boot(ctx)
}

// powerOff kills every process of the node and waits for those it
// started.
func (n *Node) powerOff() error {
	err := n.cgroup.kill()
	for _, p := range []*nodeProc{n.kubelet, n.ctrd, n.holder} {
		if p != nil {
			<-p.done
		}
	}
	n.holder = nil
	return err
}

// Stop powers the node off and removes it: its processes, cgroups,
// network namespace and files. The Node object stays in the API server.
// On a failed test, the ends of its processes' logs are logged first.
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped || n.cp == nil {
		return
	}
	n.stopped = true
	tb := n.cp.tb
	var errs []error
	if n.cgroup != nil {
		errs = append(errs, n.powerOff(), n.cgroup.remove())
	}
	if n.net != nil {
		errs = append(errs, n.net.remove())
	}
	if tb.Failed() {
		n.logTails(tb)
	}
	if dir := os.Getenv("E2E_NODE_LOGS"); dir != "" {
		errs = append(errs, n.keepLogs(filepath.Join(dir, strings.ReplaceAll(tb.Name(), "/", "_"), n.NodeName)))
	}
	if n.layout.dir != "" {
		errs = append(errs, os.RemoveAll(n.layout.dir))
	}
	if err := errors.Join(errs...); err != nil {
		tb.Errorf("removing node %s: %v", n.NodeName, err)
	}
}

// keepLogs copies the processes' logs and the kubelet's pod logs to dir
// (E2E_NODE_LOGS), since Stop removes the node's directory.
func (n *Node) keepLogs(dir string) error {
	return errors.Join(os.MkdirAll(dir, 0o755),
		os.CopyFS(filepath.Join(dir, "log"), os.DirFS(n.LogDir())),
		os.CopyFS(filepath.Join(dir, "pods"), os.DirFS(n.layout.podLogs())))
}

func (n *Node) logTails(tb testing.TB) {
	entries, _ := os.ReadDir(n.LogDir())
	for _, e := range entries {
		tb.Logf("node %s, %s:\n%s", n.NodeName, e.Name(), tail(filepath.Join(n.LogDir(), e.Name()), 6000))
	}
}

// tail is the end of a file, for error messages.
func tail(path string, max int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

// Registered reports whether the kubelet's plugin manager has registered
// a driver, from the kubelet's own metrics (its actual state of the
// world), read through kube-apiserver's node proxy.
func (n *Node) Registered(ctx context.Context, driver string) (bool, error) {
	data, err := n.cp.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.NodeName, "proxy", "metrics").DoRaw(ctx)
	if err != nil {
		return false, err
	}
	sock := filepath.Join(n.RegistrationDir(), driver+"-reg.sock")
	re := regexp.MustCompile(`(?m)^plugin_manager_total_plugins\{socket_path="` + regexp.QuoteMeta(sock) + `",state="actual_state_of_world"\} 1$`)
	return re.Match(data), nil
}

// PodContainers lists the containers containerd has for a pod (its
// sandbox's among them), running or not: ctr containers ls by the
// kubelet's pod UID label.
func (n *Node) PodContainers(pod types.UID) ([]string, error) {
	out, err := n.Ctr("containers", "ls", "-q", `labels."io.kubernetes.pod.uid"==`+string(pod))
	if err != nil {
		return nil, fmt.Errorf("ctr containers ls: %w: %s", err, out)
	}
	return strings.Fields(out), nil
}

// KillContainer kills a container's process (SIGKILL), as a crash does;
// id is containerd's (a container status's containerID, with or without
// "containerd://").
func (n *Node) KillContainer(id string) error {
	if out, err := n.Ctr("tasks", "kill", "--signal", "SIGKILL", strings.TrimPrefix(id, "containerd://")); err != nil {
		return fmt.Errorf("ctr tasks kill %s: %w: %s", id, err, out)
	}
	return nil
}
