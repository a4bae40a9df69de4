package framework

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// TestNodeRunsAPodAndLeavesNothing: a pod bound to a real Node runs, its
// output comes back through kube-apiserver's log endpoint (so the Node's
// address, the kubelet's serving certificate and kube-apiserver's client
// certificate work), a Reboot brings it back with a new container, and
// once the Node is stopped nothing of it is left on the machine: no
// process, cgroup, network namespace, address or file.
func TestNodeRunsAPodAndLeavesNothing(t *testing.T) {
	cp := StartControlPlane(t, Options{})
	n := &Node{NodeName: "node-a"}
	cp.Start(n)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: n.NodeName, HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "c", Image: BusyboxImage,
				Command: []string{"sh", "-c", "echo hello from $0; trap 'exit 0' TERM; while true; do sleep 1; done"}}},
		},
	}
	ctx := cp.Context()
	pod, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logged := func(want string) {
		t.Helper()
		var out string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			data, err := cp.Client.CoreV1().Pods("default").GetLogs("hello", &corev1.PodLogOptions{Container: "c"}).DoRaw(ctx)
			out = string(data)
			return err == nil && strings.Contains(out, want), nil
		})
		if err != nil {
			t.Fatalf("the container's output through kube-apiserver: %q, want %q: %v", out, want, err)
		}
	}
	logged("hello from sh")
	before, err := n.PodContainers(pod.UID)
	if err != nil || len(before) != 2 {
		t.Fatalf("containers of the pod: %v (%v), want the sandbox and c", before, err)
	}

	if err := n.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	logged("hello from sh")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount > 0 &&
			p.Status.ContainerStatuses[0].State.Running != nil, err
	})
	if err != nil {
		t.Fatalf("the pod did not come back after the reboot: %v", err)
	}

	pids, dir, netns, addr := n.cgroup.pids(), n.Dir(), n.net.netns, n.Address()
	if len(pids) < 4 {
		t.Fatalf("the node's cgroup holds %v: want at least the mount holder, containerd, a shim, the kubelet and the containers", pids)
	}
	n.Stop()
	// Killed processes whose parent is gone wait for the machine's init
	// to reap them: a zombie has ended.
	running := func(pid int) bool {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return false
		}
		_, after, _ := strings.Cut(string(stat), ") ")
		return !strings.HasPrefix(after, "Z")
	}
	for _, pid := range pids {
		if running(pid) {
			t.Errorf("process %d of the node outlives it", pid)
		}
	}
	for _, h := range n.cgroup.hierarchies {
		if _, err := os.Stat(filepath.Join(h, n.cgroup.path)); err == nil {
			t.Errorf("cgroup %s is left in %s", n.cgroup.path, h)
		}
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), netns) {
		t.Errorf("network namespace %s is left", netns)
	}
	if out, _ := exec.Command("ip", "-o", "addr", "show").Output(); strings.Contains(string(out), " "+addr+"/") {
		t.Errorf("address %s is left on an interface", addr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the node's directory %s is left", dir)
	}
}
