package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
)

const (
	tpuDriver        = "tpu.google.com"
	publisherNS      = "dractl-gpu-driver"
	publisherAccount = "dractl-pool-publisher"
)

// buildPublisher builds dractl-pool-publisher once per run of the tests.
func buildPublisher(t testing.TB) string { return publisherBinary.build(t) }

// publisher is one replica of dractl-pool-publisher, a process running as
// the ServiceAccount of the chart's driver/controlplane-rbac.yaml.
type publisher struct {
	identity string
	cmd      *exec.Cmd
	exited   chan struct{}
}

func startPublisher(t *testing.T, bin, kubeconfig, identity string, pools ...string) *publisher {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), identity+".log"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig", kubeconfig, "--driver-name", tpuDriver, "--leader-election-namespace", publisherNS,
		"--leader-election-identity", identity, "--sync-delay=1s", "--v=2"}
	for _, p := range pools {
		args = append(args, "--pools", p)
	}
	p := &publisher{identity: identity, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		log.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			t.Logf("%s:\n%s", identity, data)
		}
	})
	return p
}

func (p *publisher) stop(t testing.TB) {
	if !terminate(p.cmd.Process, p.exited, syscall.SIGTERM, 30*time.Second) {
		t.Errorf("publisher %s did not stop on SIGTERM", p.identity)
	}
}

func leaseHolder(ctx context.Context, cp *framework.ControlPlane) string {
	l, err := cp.Client.CoordinationV1().Leases(publisherNS).Get(ctx, tpuDriver+"-publisher", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// TestTPUBlockFromTheControlPlane: KEP-4815's multi-host TPU block
// (examples/tpu-multihost) is published by dractl-pool-publisher, two
// replicas of which elect the one that publishes; a node's own slice of
// the same driver is left alone; the two pods of a Deployment that share
// one claim of a 2x4 (two hosts) are scheduled on the hosts of the device
// allocated to it, inside one block. When the leader stops, the other
// replica takes over and the pool stays published.
func TestTPUBlockFromTheControlPlane(t *testing.T) {
	cp := startScheduling(t)
	cp.Start(framework.DeploymentControllers{})
	cp.Apply(t, "../examples/tpu-multihost/nodes.yaml", "../examples/tpu-multihost/deviceclass.yaml", "../examples/tpu-multihost/claims.yaml")
	untaintAll(t, cp)
	local := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-1-local"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: tpuDriver, NodeName: ptr.To("node-1"), Pool: resourcev1.ResourcePool{Name: "node-1", ResourceSliceCount: 1},
		// Capacity as the claims' selectors expect of every TPU device.
		Devices: []resourcev1.Device{{Name: "local-0", Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"tpus": {Value: resource.MustParse("4")}}}}}}
	local, err := cp.Client.ResourceV1().ResourceSlices().Create(cp.Context(), local, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	sa := cp.ServiceAccount(t, publisherNS, publisherAccount)
	installChart(t, cp, t.TempDir(), "driver/controlplane-rbac.yaml")
	kubeconfig, bin := cp.Kubeconfig(sa), buildPublisher(t)
	replicas := map[string]*publisher{}
	for _, id := range []string{"replica-0", "replica-1"} {
		replicas[id] = startPublisher(t, bin, kubeconfig, id, "../examples/tpu-multihost/resourceslices.yaml")
	}
	published := func(what string) {
		t.Helper()
		waitFor(t, time.Minute, what, func(ctx context.Context) (bool, error) {
			sel := fields.Set{resourcev1.ResourceSliceSelectorDriver: tpuDriver}
			l, err := cp.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
			if err != nil {
				return false, err
			}
			var tpu []resourcev1.ResourceSlice
			for _, s := range l.Items {
				if s.Spec.Pool.Name == "tpu-pool" {
					tpu = append(tpu, s)
				}
			}
			return len(tpu) == 2 && tpu[0].Spec.Pool.ResourceSliceCount == 2 && ptr.Deref(tpu[0].Spec.PerDeviceNodeSelection, false) &&
				tpu[0].Spec.NodeName == nil && tpu[0].Spec.Pool.Generation == tpu[1].Spec.Pool.Generation, nil
		})
	}
	published("the TPU pool to be published from the control plane")
	leader := leaseHolder(cp.Context(), cp)
	if replicas[leader] == nil {
		t.Fatalf("lease held by %q, want one of the replicas", leader)
	}

	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "trainer"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "trainer"}},
				Spec: corev1.PodSpec{
					SchedulerName:  dractlProfile,
					ResourceClaims: []corev1.PodResourceClaim{{Name: "tpu", ResourceClaimName: ptr.To("tpu-2x4")}},
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "tpu"}}}}},
				},
			},
		},
	}
	if _, err := cp.Client.AppsV1().Deployments("default").Create(cp.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, cp, 2, 2*time.Minute)
	claim, err := cp.Client.ResourceV1().ResourceClaims("default").Get(cp.Context(), "tpu-2x4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	results := claim.Status.Allocation.Devices.Results
	hosts := map[string][]string{"tpu-2x4-1": {"node-1", "node-2"}, "tpu-2x4-2": {"node-5", "node-6"}}
	if len(results) != 1 || results[0].Pool != "tpu-pool" || hosts[results[0].Device] == nil {
		t.Fatalf("claim allocated %+v, want one 2x4 of tpu-pool", results)
	}
	if len(claim.Status.ReservedFor) != 2 {
		t.Errorf("claim reserved for %+v, want both pods", claim.Status.ReservedFor)
	}
	for _, p := range pods(t, cp) {
		if !slices.Contains(hosts[results[0].Device], p.Spec.NodeName) {
			t.Errorf("pod %s on %s, want a host of %s %v", p.Name, p.Spec.NodeName, results[0].Device, hosts[results[0].Device])
		}
	}
	checkAllocations(t, cp)

	replicas[leader].stop(t)
	waitFor(t, time.Minute, "the other replica to take over", func(ctx context.Context) (bool, error) {
		h := leaseHolder(ctx, cp)
		return h != "" && h != leader, nil
	})
	published("the TPU pool to stay published")
	got, err := cp.Client.ResourceV1().ResourceSlices().Get(cp.Context(), local.Name, metav1.GetOptions{})
	if err != nil || got.ResourceVersion != local.ResourceVersion {
		t.Fatalf("the node's own slice was touched: %v, %v", got, err)
	}
}
