package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/gpuconfig"
	"github.com/dractl/dractl/pkg/mockgpu"
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

// injectEnv is the environment a container runtime gives a container for
// the CDI device IDs, from the spec files alone. Device nodes are given by
// path and read from the host, which has no GPUs: copies of the specs
// without them are injected.
func injectEnv(t testing.TB, cdiDir string, ids []string) []string {
	t.Helper()
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(cdiDir, "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s cdispec.Spec
		if err := yaml.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		for i := range s.Devices {
			s.Devices[i].ContainerEdits.DeviceNodes = nil
		}
		if data, err = yaml.Marshal(&s); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		t.Fatalf("injecting %v: %v (unresolved %v)", ids, err, unresolved)
	}
	return spec.Process.Env
}

func gpuConfig(params string) runtime.RawExtension {
	return runtime.RawExtension{Raw: []byte(`{"apiVersion":"` + gpuconfig.APIVersion + `","kind":"` + gpuconfig.Kind + `",` + params + `}`)}
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
			waitFor(t, time.Minute, "the driver to register with the kubelet", func(context.Context) (bool, error) {
				return n.kubelet.Registered(gpuDriver), nil
			})
			name := "trainer-" + server
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: corev1.PodSpec{
					SchedulerName: dractlProfile,
					// The nodes of earlier servers keep their slices.
					NodeSelector:   map[string]string{"kubernetes.io/hostname": server},
					ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("two-3g")}},
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
				},
			}
			if _, err := cp.Client.CoreV1().Pods("default").Create(cp.Context(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
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
			env := injectEnv(t, n.cdiDir, n.kubelet.CDIDevices(pod.UID, "c"))
			uuids := []string{record[0][1], record[1][1]}
			want := []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")}
			for _, r := range results {
				p := mockgpu.EnvPrefix(r.Device)
				want = append(want, p+"TIMESLICE_INTERVAL=Short", p+"COMPUTE_INSTANCE_PROFILE=1c.")
			}
			for _, w := range want {
				if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, w) }) {
					t.Errorf("the container's environment lacks %q:\n%s", w, strings.Join(env, "\n"))
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
