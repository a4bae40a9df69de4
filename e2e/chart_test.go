package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/e2e/helmchart"
	"github.com/dractl/dractl/internal/images"
)

// imagesDir is where `make images` writes the chart's images.
const imagesDir = "../bin/images"

// chartImages are the OCI tarballs of every image the chart names, as
// `make images` built them; a missing one fails the test with what to
// run.
func chartImages(t *testing.T) []string {
	t.Helper()
	names, err := images.ChartNames("..")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for key, name := range names {
		// Absolute: ctr runs in the node's directory.
		path, err := filepath.Abs(filepath.Join(imagesDir, name.Repository+".tar"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("image %s (images.%s) of the chart: %v; `make images` builds it", name.Ref(), key, err)
		}
		out = append(out, path)
	}
	slices.Sort(out)
	return out
}

// freePort is a TCP port nothing listens on now: a port for a pod on the
// host network, which shares this machine's network namespace.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// helmConfig is the Helm SDK's action configuration against the control
// plane, as `helm --kubeconfig` makes it, releases stored as Secrets.
// kube-apiserver here reports no version (v0.0.0-master: the test server
// is not stamped at build time), which the chart's kubeVersion refuses;
// its capabilities are discovered as Helm discovers them, with the
// version of the k8s.io/kubernetes it is built from.
func helmConfig(t *testing.T, cp *framework.ControlPlane) *action.Configuration {
	t.Helper()
	kubeconfig, namespace := cp.Kubeconfig(nil), "default"
	getter := &genericclioptions.ConfigFlags{KubeConfig: &kubeconfig, Namespace: &namespace}
	cfg := action.NewConfiguration()
	if err := cfg.Init(getter, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	dc, err := getter.ToDiscoveryClient()
	if err != nil {
		t.Fatal(err)
	}
	apiVersions, err := action.GetVersionSet(dc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := common.ParseKubeVersion(kubernetesVersion(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Capabilities = &common.Capabilities{APIVersions: apiVersions, KubeVersion: *kv, HelmVersion: common.DefaultCapabilities.HelmVersion}
	return cfg
}

// kubernetesVersion is the version of k8s.io/kubernetes this module
// requires (go.mod), whose kube-apiserver the tests run.
func kubernetesVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "k8s.io/kubernetes" {
			return f[1]
		}
	}
	t.Fatal("go.mod requires no k8s.io/kubernetes")
	return ""
}

// chartPod waits until the one pod of a chart's workload (by its labels)
// runs on node with every container ready, and returns it.
func chartPod(t *testing.T, cp *framework.ControlPlane, namespace, selector, node string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	seen := "no pod"
	err := wait.PollUntilContextTimeout(cp.Context(), 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(l.Items) != 1 {
			if err == nil {
				seen = fmt.Sprintf("%d pods", len(l.Items))
			}
			return false, err
		}
		pod = &l.Items[0]
		seen = fmt.Sprintf("%s %s on %q, containers %+v", pod.Name, pod.Status.Phase, pod.Spec.NodeName, pod.Status.ContainerStatuses)
		if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName != node {
			return false, nil
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.ContainersReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for the pod %s of %s to run on %s: %v; last seen: %s", selector, namespace, node, err, seen)
	}
	return pod
}

// TestHelmChartOnRealNode installs the chart with the Helm SDK, its
// images built by `make images` imported into a real node's containerd:
// dractl-scheduler, the monitor and the mock GPU driver's DaemonSet run
// as pods on the node (the DaemonSet's pod made by kube-controller-
// manager's daemonset controller, the Deployments' by its deployment and
// replicaset controllers, all placed by a stock kube-scheduler); a
// workload that opts into dractl's scheduler (schedulerName: dractl) is
// placed by the chart's scheduler, gets its MIG partition from the
// chart's driver, runs and prints it. Deleting the workload, then `helm
// uninstall` (its dependents deleted by the garbage collector), leave no
// prepared claim, no partition and no CDI spec on the node, and no pod of
// the chart.
//
// The values are the ones this node needs and nothing else: the host
// network (no CNI here), kube-apiserver's address (no kube-proxy for the
// kubernetes Service), the node's kubelet, CDI and driver directories
// (under the test's), the images' pull policy Never (they are imported,
// never pulled), ports free on this machine for the scheduler and the
// monitor, and one replica of each (every node here shares this
// machine's network namespace, so two replicas on the host network would
// bind one port).
func TestHelmChartOnRealNode(t *testing.T) {
	tarballs := chartImages(t)
	cp := framework.StartControlPlane(t, framework.Options{Components: []framework.Component{
		framework.ResourceClaimController{}, framework.DeploymentControllers{},
		framework.DaemonSetController{}, framework.GarbageCollector{},
	}})
	// The cluster's kube-scheduler: the default profile alone, with the
	// in-tree plugins. Pods asking for dractl are the chart's scheduler's.
	stock := filepath.Join(t.TempDir(), "kube-scheduler.yaml")
	if err := os.WriteFile(stock, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cp.Start(framework.Scheduler{ConfigFile: stock})
	node := &framework.Node{NodeName: "gpu-node", Images: tarballs}
	cp.Start(node)
	t.Cleanup(node.Stop)
	n := &gpuNode{cp: cp, name: node.NodeName, node: node, kubelet: node,
		stateDir: filepath.Join(node.Dir(), "var-lib-dractl-gpu-driver"), cdiDir: node.CDIDir()}
	t.Cleanup(func() {
		if t.Failed() {
			chartLogs(t, cp)
		}
	})
	if _, err := cp.Client.CoreV1().Nodes().Patch(cp.Context(), node.NodeName, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"dractl.dev/mock-gpus":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	api, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	apiPort, err := strconv.Atoi(api.Port())
	if err != nil {
		t.Fatalf("kube-apiserver at %s: %v", cp.Config.Host, err)
	}
	values := map[string]any{
		"hostNetwork": true,
		"apiServer":   map[string]any{"host": api.Hostname(), "port": apiPort},
		"images":      map[string]any{"pullPolicy": "Never"},
		"scheduler":   map[string]any{"replicas": 1, "securePort": freePort(t)},
		"monitor":     map[string]any{"replicas": 1, "metrics": map[string]any{"port": freePort(t)}},
		"driver":      map[string]any{"kubeletRootDir": node.RootDir(), "cdiDir": n.cdiDir, "stateDir": n.stateDir},
	}
	chrt, err := loader.Load(filepath.Join("..", helmchart.ChartDir))
	if err != nil {
		t.Fatal(err)
	}
	cfg := helmConfig(t, cp)
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.WaitStrategy = "dractl", "default", kube.HookOnlyStrategy
	if _, err := install.RunWithContext(cp.Context(), chrt, values); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			uninstall(cfg).Run("dractl")
		}
	})

	components := []struct{ namespace, selector string }{
		{"kube-system", "app.kubernetes.io/name=dractl-scheduler"},
		{"dractl-system", "app.kubernetes.io/name=dractl-monitor"},
		{"dractl-gpu-driver", "app=dractl-gpu-driver"},
	}
	scheduler := chartPod(t, cp, components[0].namespace, components[0].selector, node.NodeName)
	for _, c := range components[1:] {
		chartPod(t, cp, c.namespace, c.selector, node.NodeName)
	}
	n.registered(t)

	createTemplate(t, cp, "mig-3g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass3g, 1)}})
	createPod(t, cp, devicePod("workload", dractlProfile, node.NodeName, []string{"mig-3g"}, "c"))
	pod := running(t, cp, "workload")
	claim := claimOf(t, cp, "workload")
	if r := claim.Status.Allocation.Devices.Results; len(r) != 1 || r[0].Driver != gpuDriver || !strings.Contains(r[0].Device, "mig-3g") {
		t.Fatalf("the workload's claim has %+v, want one 3g MIG device of %s", r, gpuDriver)
	}
	scheduledBy(t, cp, pod, scheduler)
	n.checkPrepared(t, pod)
	t.Logf("the workload sees:\n%v", n.checkContainer(t, pod, "c", claim))
	if parts := n.partitions(t); len(parts) != 1 {
		t.Fatalf("the driver's partitions %+v, want the workload's one", parts)
	}

	deleteAndWait(t, cp, pod)
	released(t, cp, claim)
	if _, err := uninstall(cfg).Run("dractl"); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	uninstalled = true
	for _, c := range components {
		waitFor(t, 2*time.Minute, "the pods "+c.selector+" to be gone", func(ctx context.Context) (bool, error) {
			l, err := cp.Client.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: c.selector})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return err == nil && len(l.Items) == 0, err
		})
	}
	n.checkClean(t)
	// Stopped containers stay until the kubelet's container garbage
	// collection; no process of the chart's may run.
	waitFor(t, time.Minute, "no container running on the node", func(context.Context) (bool, error) {
		tasks, err := node.Ctr("tasks", "list")
		return err == nil && !strings.Contains(tasks, "RUNNING"), err
	})
}

// uninstall is `helm uninstall` without waiting (the test waits for what
// it checks), its dependents deleted in the background, as the CLI's
// defaults have it.
func uninstall(cfg *action.Configuration) *action.Uninstall {
	u := action.NewUninstall(cfg)
	u.WaitStrategy, u.DeletionPropagation = kube.HookOnlyStrategy, "background"
	return u
}

// scheduledBy checks that the chart's scheduler pod bound the workload
// (its log at --v=2, read through kube-apiserver): the cluster's
// kube-scheduler has no dractl profile, and this says which process did.
func scheduledBy(t *testing.T, cp *framework.ControlPlane, pod *corev1.Pod, scheduler *corev1.Pod) {
	t.Helper()
	want := fmt.Sprintf("Successfully bound pod to node\" pod=\"%s/%s\" node=\"%s\"", pod.Namespace, pod.Name, pod.Spec.NodeName)
	waitFor(t, time.Minute, "the chart's scheduler to log binding "+pod.Name, func(ctx context.Context) (bool, error) {
		data, err := cp.Client.CoreV1().Pods(scheduler.Namespace).GetLogs(scheduler.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && strings.Contains(string(data), want), nil
	})
}

// chartLogs logs the containers' output of the chart's pods, for a failed
// test.
func chartLogs(t *testing.T, cp *framework.ControlPlane) {
	for _, ns := range []string{"kube-system", "dractl-system", "dractl-gpu-driver"} {
		l, err := cp.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range l.Items {
			for _, c := range p.Spec.Containers {
				data, err := cp.Client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: ptr.To[int64](40)}).DoRaw(context.Background())
				t.Logf("pod %s/%s (%s), container %s: %v\n%s", ns, p.Name, p.Status.Phase, c.Name, err, data)
			}
		}
	}
}
