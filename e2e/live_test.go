package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
)

// TestLiveVerbs publishes three examples through the real API server,
// allocates claims as kube-scheduler would, lets the resourceclaim
// controller create a pod's claim from its template, and checks every
// live verb's output against golden files.
func TestLiveVerbs(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{
		Components: []framework.Component{framework.ResourceClaimController{}},
	})
	ctx := cp.Context()
	publish(t, cp, "dgx-h100-mixins", "gpu-partitions", "tpu-multihost")
	kc := cp.Kubeconfig(nil)

	// A scheduled pod whose claim holds one 10Gi partition of my-node's GPU.
	user := createPod(t, cp, podSpec("partition-user", "my-node", corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("gpu-partition-10gi")}))
	allocate(t, cp, "default", "gpu-partition-10gi", "my-node", user)
	// A MIG 1g.10gb partition of the DGX's GPU 0 in use.
	allocate(t, cp, "default", "mig-1g-10gb", "dgx-h100-node", nil)

	// A pending pod asking, through a template, for eight 7g.80gb MIG
	// devices: one GPU has a 1g.10gb partition in use, so only seven fit.
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "eight-7g"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "mig", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: "mig.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 8,
				Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes['gpu.nvidia.com'].profile == '7g.80gb'`}}},
			}}},
		}}},
	}
	if _, err := cp.Client.ResourceV1().ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	trainer := createPod(t, cp, podSpec("trainer", "", corev1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight-7g")}))
	eventually(t, "the resourceclaim controller to create the trainer's claim", func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods("default").Get(ctx, trainer.Name, metav1.GetOptions{})
		return err == nil && len(p.Status.ResourceClaimStatuses) == 1 && p.Status.ResourceClaimStatuses[0].ResourceClaimName != nil, err
	})

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"get-pools", []string{"get", "pools"}, 0},
		{"get-pools-wide", []string{"get", "pools", "-o", "wide"}, 0},
		{"get-pools-json", []string{"get", "pools", "my-node", "-o", "json"}, 0},
		{"describe-node-dgx", []string{"describe", "node", "dgx-h100-node"}, 0},
		{"describe-node-dgx.svg", []string{"describe", "node", "dgx-h100-node", "-o", "svg"}, 0},
		{"describe-pool-partitions", []string{"describe", "pool", "resource-driver.example.com/my-node"}, 0},
		{"describe-node-missing", []string{"describe", "node", "no-such-node"}, 2},
		{"explain-pod-pending", []string{"explain", "pod/trainer"}, 0},
		{"explain-pod-pending-one-node", []string{"explain", "pod/trainer", "--node", "dgx-h100-node"}, 0},
		{"explain-pod-scheduled", []string{"explain", "pod/partition-user"}, 0},
		{"explain-pod-missing", []string{"explain", "pod/nobody"}, 2},
		{"validate-live", []string{"validate", "--live"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dractl(t, kc, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.out, r.err)
			}
			golden(t, tc.name, normalize(r.out+r.err, "trainer-gpus"))
		})
	}

	t.Run("get-pools-json-is-the-table", func(t *testing.T) {
		var got struct {
			Pools []struct {
				Pool      string `json:"pool"`
				Allocated int    `json:"allocated"`
				Devices   int    `json:"devices"`
				State     string `json:"state"`
			} `json:"pools"`
		}
		r := dractl(t, kc, "get", "pools", "-o", "json")
		if err := json.Unmarshal([]byte(r.out), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string][2]int{"dgx-h100-node": {1, 152}, "my-node": {1, 5}}
		for _, p := range got.Pools {
			if w, ok := want[p.Pool]; ok && (p.Allocated != w[0] || p.Devices != w[1] || p.State != "ok") {
				t.Errorf("pool %s: %d/%d devices %s, want %d/%d ok", p.Pool, p.Allocated, p.Devices, p.State, w[0], w[1])
			}
		}
	})

	t.Run("snapshot-reads-back-offline", func(t *testing.T) {
		dir := t.TempDir()
		if r := dractl(t, kc, "snapshot", dir); r.code != 0 {
			t.Fatalf("snapshot: exit %d: %s", r.code, r.err)
		}
		for _, f := range []string{"resourceslices.yaml", "deviceclasses.yaml", "resourceclaims.yaml", "resourceclaimtemplates.yaml", "nodes.yaml", "pods.yaml"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("snapshot did not write %s: %v", f, err)
			}
		}
		// The offline verbs read the snapshot and say what the live ones say.
		if r := dractl(t, "", "validate", "-f", dir); r.code != 0 {
			t.Errorf("validate -f snapshot: exit %d\n%s%s", r.code, r.out, r.err)
		}
		for _, args := range [][]string{
			{"explain", "pod/trainer"},
			{"describe", "node", "dgx-h100-node"},
		} {
			liveOut := dractl(t, kc, args...)
			offline := dractl(t, "", append(args, "-f", dir)...)
			if offline.code != 0 || offline.out != liveOut.out {
				t.Errorf("%v from the snapshot (exit %d) differs from the cluster:\n--- snapshot\n%s%s\n--- cluster\n%s", args, offline.code, offline.out, offline.err, liveOut.out)
			}
		}
	})

	t.Run("kubectl-plugin", func(t *testing.T) {
		bin := t.TempDir()
		build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-dra"), "./cmd/dractl")
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		// kubectl looks up "kubectl dra" as the executable kubectl-dra on
		// PATH and executes it with the remaining arguments.
		path, err := exec.LookPath("kubectl-dra")
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(path, "get", "pools", "my-node", "--kubeconfig", kc)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "resource-driver.example.com   my-node") {
			t.Fatalf("kubectl dra get pools: %v\n%s", err, out)
		}
		help, _ := exec.Command(path, "get", "--help").CombinedOutput()
		if !strings.Contains(string(help), "kubectl dra get pools") {
			t.Errorf("help of the plugin does not speak of \"kubectl dra\":\n%s", help)
		}
	})
}

func podSpec(name, node string, claims ...corev1.PodResourceClaim) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{
			NodeName:       node,
			ResourceClaims: claims,
			Containers:     []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	for _, c := range claims {
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: c.Name})
	}
	return p
}

func createPod(t testing.TB, cp *framework.ControlPlane, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	p, err := cp.Client.CoreV1().Pods(p.Namespace).Create(cp.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
