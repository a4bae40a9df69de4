package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/driver/gpu"
)

// mockServers are go-nvml's mock DGX servers that dractl-gpu-driver's
// test-only --nvml-mock flag runs on (nvmlmock.ServerNames; named here so
// that this module does not build go-nvml itself).
var mockServers = []string{"dgxa100", "dgxb200", "dgxh100", "dgxh200"}

// newNVMLNode is a GPU node whose driver runs the NVML backend on a mock
// server; the node is named after the server.
func newNVMLNode(t *testing.T, cp *framework.ControlPlane, server string) *gpuNode {
	t.Helper()
	n := newGPUNode(t, cp, server)
	n.backend = []string{"--backend=nvml", "--nvml-mock=" + server}
	return n
}

// nvmlRecord is the driver's record of the MIG devices it created, read
// from its state directory: claim UID and compute slices of each.
func (n *gpuNode) nvmlRecord(t testing.TB) [][2]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.stateDir, "nvml-instances.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Instances []struct {
			Claim         string `json:"claim"`
			ComputeSlices int    `json:"computeSlices"`
			UUID          string `json:"uuid"`
		} `json:"instances"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for _, in := range f.Instances {
		out = append(out, [2]string{in.Claim, in.UUID})
		if in.ComputeSlices != 1 {
			t.Errorf("instance %s has a compute instance of %d slices, want 1 (the claim's computeInstanceProfile)", in.UUID, in.ComputeSlices)
		}
	}
	return out
}

func gpuConfig(params string) runtime.RawExtension {
	return runtime.RawExtension{Raw: []byte(`{"apiVersion":"` + gpu.APIVersion + `","kind":"` + gpu.Kind + `",` + params + `}`)}
}

// TestNVMLDriverOnMockDGX runs dractl-gpu-driver --backend=nvml on each of
// go-nvml's mock DGX servers under the kubelet's DRA manager: it publishes
// the GPUs NVML reports, a pod whose claim asks for two 3g MIG devices
// with a configuration is scheduled by dractl-scheduler, and the driver
// creates the MIG devices as configured — the DeviceClass's time-slice
// overridden by the claim's, one-slice compute instances — and the
// container gets both devices in NVIDIA_VISIBLE_DEVICES and the
// configuration in its environment; deleting the pod destroys them.
func TestNVMLDriverOnMockDGX(t *testing.T) {
	cp := startScheduling(t)
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "mig-long-slices.dractl.dev"},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: "device.driver == 'gpu.dractl.dev' && device.attributes['gpu.dractl.dev'].type == 'mig'"}}},
			Config: []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
				Driver: gpuDriver, Parameters: gpuConfig(`"timeSlicing":{"interval":"Long"}`)}}}},
		},
	}
	if _, err := cp.Client.ResourceV1().DeviceClasses().Create(cp.Context(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createTemplate(t, cp, "two-3g", resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{request("gpu", class.Name, 2, "device.attributes['gpu.dractl.dev'].profile.startsWith('3g.')")},
		Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
			Driver: gpuDriver, Parameters: gpuConfig(`"computeInstanceProfile":"1c","timeSlicing":{"interval":"Short"}`)}}}},
	})

	for _, server := range mockServers {
		t.Run(server, func(t *testing.T) {
			n := newNVMLNode(t, cp, server)
			n.start(t, "")
			n.published(t)
			n.registered(t)
			name := "trainer-" + server
			// The nodes of earlier servers keep their slices.
			pod := createPod(t, cp, devicePod(name, dractlProfile, server, []string{"two-3g"}, "c"))
			pod = running(t, cp, name)
			claim := claimOf(t, cp, name)

			results := claim.Status.Allocation.Devices.Results
			if len(results) != 2 || results[0].Pool != server || results[1].Pool != server {
				t.Fatalf("allocated %+v, want two MIG devices of %s", results, server)
			}
			record := n.nvmlRecord(t)
			if len(record) != 2 || record[0][0] != string(claim.UID) || record[1][0] != string(claim.UID) {
				t.Fatalf("the driver created %v, want two MIG devices for claim %s", record, claim.UID)
			}
			// What the container itself sees: exactly what its CDI
			// devices promise, the MIG devices by UUID among it.
			seen := n.checkContainer(t, pod, "c", claim)
			uuids := []string{record[0][1], record[1][1]}
			if got := seen.env["NVIDIA_VISIBLE_DEVICES"]; got != strings.Join(uuids, ",") {
				t.Errorf("the container sees NVIDIA_VISIBLE_DEVICES=%s, want the driver's MIG devices %v", got, uuids)
			}
			for _, r := range results {
				p := gpu.EnvPrefix(r.Device)
				if seen.env[p+"TIMESLICE_INTERVAL"] != "Short" || !strings.HasPrefix(seen.env[p+"COMPUTE_INSTANCE_PROFILE"], "1c.") {
					t.Errorf("the container sees %v for %s, want the claim's time slice and compute instance profile", seen.env, r.Device)
				}
			}
			for _, dn := range []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"} {
				if _, ok := seen.nodes[dn]; !ok {
					t.Errorf("the container has no %s: %v", dn, seen.nodes)
				}
			}
			for _, u := range uuids {
				if !strings.HasPrefix(u, "MIG-") {
					t.Errorf("MIG device UUID %q", u)
				}
			}

			deleteAndWait(t, cp, pod)
			n.checkClean(t)
			if record := n.nvmlRecord(t); len(record) != 0 {
				t.Fatalf("MIG devices left: %v", record)
			}
			released(t, cp, claim)
		})
	}
}
