package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/ops/monitor"
)

// gpuOf is the GPU index of a device of the mock driver ("gpu-1-mig-…").
func gpuOf(device string) string {
	idx, _, _ := strings.Cut(strings.TrimPrefix(device, "gpu-"), "-")
	return idx
}

// nodeTaints reads the driver's published slices of the node: the taints
// of each device, as key=value:Effect, by device name, and the number of
// devices.
func (n *gpuNode) nodeTaints(ctx context.Context) (map[string][]string, int, error) {
	sel := fields.Set{resourcev1.ResourceSliceSelectorNodeName: n.name, resourcev1.ResourceSliceSelectorDriver: gpuDriver}
	l, err := n.cp.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, 0, err
	}
	out, devices := map[string][]string{}, 0
	for _, s := range l.Items {
		for _, d := range s.Spec.Devices {
			devices++
			for _, t := range d.Taints {
				out[d.Name] = append(out[d.Name], fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
			}
		}
	}
	return out, devices, nil
}

// health is the device health the kubelet reports in a pod's status for
// its claim "gpu" (KEP-4680), "" while it reports none.
func health(t testing.TB, cp *framework.ControlPlane, pod string) (string, string) {
	t.Helper()
	p, err := cp.Client.CoreV1().Pods("default").Get(cp.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range p.Status.ContainerStatuses {
		for _, rs := range cs.AllocatedResourcesStatus {
			if rs.Name == "claim:gpu" && len(rs.Resources) == 1 {
				return string(rs.Resources[0].Health), ptr.Deref(rs.Resources[0].Message, "")
			}
		}
	}
	return "", ""
}

// deviceEvent waits for an Event of the monitor with reason on a
// ResourceSlice of node whose note contains what.
func deviceEvent(t testing.TB, cp *framework.ControlPlane, reason, node, what string) {
	t.Helper()
	eventually(t, reason+" on a slice of "+node, func(ctx context.Context) (bool, error) {
		list, err := cp.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == "ResourceSlice" && e.Related != nil && e.Related.Name == node && strings.Contains(e.Note, what) {
				return true, nil
			}
		}
		return false, nil
	})
}

// healthNode is the GPU node of the health tests: dractl-gpu-driver on
// two A100s, reading health every 200 ms, with flags added, published and
// registered with the kubelet.
func healthNode(t *testing.T, cp *framework.ControlPlane, flags ...string) *gpuNode {
	t.Helper()
	n := newGPUNode(t, cp, "gpu-node")
	n.backend = append(append(n.backend, "--health-interval=200ms"), flags...)
	n.start(t, "")
	n.published(t)
	n.registered(t)
	return n
}

// TestUnhealthyDeviceTainted is the day-two path of a failing GPU through
// the real control plane: dractl-gpu-driver (mock backend) serves a pod a
// MIG device; the GPU under it turns unhealthy (the mock's unhealthy/<gpu>
// file); the driver republishes its slices with every device of that GPU
// tainted dractl.dev/unhealthy:NoSchedule; the monitor records a
// DeviceTainted Event; the running pod's status shows its device
// Unhealthy (the kubelet's DRA manager, from the driver's health stream);
// the next pods, of dractl-scheduler's profile and of kube-scheduler's
// stock one, get MIG devices of the other GPU, and a pod that only the
// sick GPU can serve waits, dractl-scheduler's DevicesUnavailable Event
// saying the devices' taints are not tolerated. When the GPU recovers the
// taint goes, the monitor records DeviceUntainted, the pod's status says
// Healthy, and the waiting pod runs on the GPU again.
func TestUnhealthyDeviceTainted(t *testing.T) {
	cp := startScheduling(t)
	n := healthNode(t, cp)
	ctx, cancel := context.WithCancel(cp.Context())
	done := make(chan result, 1)
	go func() {
		done <- dractlContext(ctx, cp.Kubeconfig(nil), "monitor", "--leader-elect=false", "--metrics-bind-address", freeAddress(t))
	}()
	t.Cleanup(func() {
		cancel()
		if r := <-done; r.code != 0 {
			t.Errorf("monitor exited %d: %s", r.code, r.err)
		}
	})

	const small = "mig-1g-5gb.dractl.dev"
	createTemplate(t, cp, "mig-1g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", small, 1)}})
	createClaimPod(t, cp, "first", dractlProfile, "mig-1g", "")
	running(t, cp, "first")
	sick := gpuOf(claimOf(t, cp, "first").Status.Allocation.Devices.Results[0].Device)
	healthy := map[string]string{"0": "1", "1": "0"}[sick]
	if h, _ := health(t, cp, "first"); h != "" && h != string(corev1.ResourceHealthStatusHealthy) {
		t.Fatalf("first's device health %q before any fault", h)
	}

	if err := os.MkdirAll(filepath.Join(n.stateDir, "gpus", "unhealthy"), 0o755); err != nil {
		t.Fatal(err)
	}
	fault := filepath.Join(n.stateDir, "gpus", "unhealthy", sick)
	if err := os.WriteFile(fault+".tmp", []byte("XID 79: fallen off the bus"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fault+".tmp", fault); err != nil {
		t.Fatal(err)
	}
	want := driverkit.TaintKeyUnhealthy + "=XID-79-fallen-off-the-bus:NoSchedule"
	waitFor(t, time.Minute, "GPU "+sick+"'s devices tainted, GPU "+healthy+"'s not", func(ctx context.Context) (bool, error) {
		taints, devices, err := n.nodeTaints(ctx)
		if err != nil || devices == 0 {
			return false, err
		}
		for dev, ts := range taints {
			if gpuOf(dev) != sick || len(ts) != 1 || ts[0] != want {
				return false, fmt.Errorf("%s tainted %v", dev, ts)
			}
		}
		return len(taints) == devices/2, nil
	})
	deviceEvent(t, cp, monitor.ReasonDeviceTainted, n.name, want)
	waitFor(t, time.Minute, "first's status to show its device unhealthy", func(context.Context) (bool, error) {
		h, msg := health(t, cp, "first")
		return h == string(corev1.ResourceHealthStatusUnhealthy) && strings.Contains(msg, "XID 79"), nil
	})

	// Both schedulers keep new claims off the tainted GPU.
	createClaimPod(t, cp, "second", dractlProfile, "mig-1g", "")
	createClaimPod(t, cp, "third", stockProfile, "mig-1g", "")
	for _, name := range []string{"second", "third"} {
		running(t, cp, name)
		if dev := claimOf(t, cp, name).Status.Allocation.Devices.Results[0].Device; gpuOf(dev) != healthy {
			t.Errorf("%s was given %s of the tainted GPU %s", name, dev, sick)
		}
	}
	pinned := request("gpu", small, 1, fmt.Sprintf("device.attributes['%s'].parentIndex == %s", gpuDriver, sick))
	createTemplate(t, cp, "mig-1g-sick", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{pinned}})
	createClaimPod(t, cp, "pinned", dractlProfile, "mig-1g-sick", "")
	holdsFor(t, 3*time.Second, "the pod only the tainted GPU can serve to wait", func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods("default").Get(ctx, "pinned", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "", err
	})
	waitFor(t, time.Minute, "dractl's account of the waiting pod to name the taints", func(ctx context.Context) (bool, error) {
		evs, err := cp.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool {
			return e.Reason == "DevicesUnavailable" && e.Regarding.Name == "pinned" && strings.Contains(e.Note, "claim gpu: device taints not tolerated")
		}), nil
	})

	if err := os.Remove(fault); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the taints to go", func(ctx context.Context) (bool, error) {
		taints, _, err := n.nodeTaints(ctx)
		return err == nil && len(taints) == 0, err
	})
	deviceEvent(t, cp, monitor.ReasonDeviceUntainted, n.name, want)
	waitFor(t, time.Minute, "first's status to show its device healthy again", func(context.Context) (bool, error) {
		h, _ := health(t, cp, "first")
		return h == string(corev1.ResourceHealthStatusHealthy), nil
	})
	running(t, cp, "pinned")
	if dev := claimOf(t, cp, "pinned").Status.Allocation.Devices.Results[0].Device; gpuOf(dev) != sick {
		t.Errorf("pinned was given %s, want a device of the recovered GPU %s", dev, sick)
	}
}
