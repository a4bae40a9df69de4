package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
)

// podLog is a container's output, read through kube-apiserver's pod log
// endpoint: kube-apiserver asks the kubelet on the Node's address, which
// reads containerd's log of the container.
func podLog(t testing.TB, cp *framework.ControlPlane, pod, container string) string {
	t.Helper()
	data, err := cp.Client.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(cp.Context())
	if err != nil {
		t.Fatalf("the log of %s/%s: %v", pod, container, err)
	}
	return string(data)
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

// TestRealNodeRunsAPod: a pod bound to a real Node runs in containerd
// through runc, and its output comes back through kube-apiserver.
func TestRealNodeRunsAPod(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	n := &framework.Node{NodeName: "node-a"}
	cp.Start(n)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: n.NodeName, HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{shellContainer("c", "echo hello from $(hostname)")},
		},
	}
	if _, err := cp.Client.CoreV1().Pods("default").Create(cp.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running(t, cp, "hello")
	out := waitLog(t, cp, "hello", "c", "done")
	if !strings.Contains(out, "hello from ") {
		t.Fatalf("output %q", out)
	}
	deleteAndWait(t, cp, pod)
}
