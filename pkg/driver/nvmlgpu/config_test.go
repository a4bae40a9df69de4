package nvmlgpu_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// configured is a claim of one request "gpu" served by devices, carrying
// opaque GpuConfig parameters: from its class, then from the claim.
func configured(name string, class, claim string, devices ...string) *resourcev1.ResourceClaim {
	var rs []resourcev1.DeviceRequestAllocationResult
	for _, d := range devices {
		rs = append(rs, at.Result("gpu", driver, node, d))
	}
	c := at.Claim(name).Allocated(rs...).Obj()
	add := func(source resourcev1.AllocationConfigSource, params string) {
		if params == "" {
			return
		}
		c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, resourcev1.DeviceAllocationConfiguration{
			Source: source, Requests: []string{"gpu"},
			DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
				Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"gpu.dractl.dev/v1alpha1","kind":"GpuConfig",` + params + `}`)},
			}},
		})
	}
	// The claim's first: the kit orders them, not the allocation.
	add(resourcev1.AllocationConfigSourceClaim, claim)
	add(resourcev1.AllocationConfigSourceClass, class)
	return c
}

// inject is what a container runtime does with the CDI device IDs the
// kubelet hands it for a container: edits from the spec files alone. The
// runtime reads device nodes given by path from the host, which has no
// GPUs here, so they are left out of copies of the specs.
func (n *machine) inject(ids ...string) *oci.Spec {
	n.t.Helper()
	dir := n.t.TempDir()
	files, _ := filepath.Glob(filepath.Join(n.dir, "cdi", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			n.t.Fatal(err)
		}
		var s cdispec.Spec
		if err := yaml.Unmarshal(data, &s); err != nil {
			n.t.Fatal(err)
		}
		for i := range s.Devices {
			s.Devices[i].ContainerEdits.DeviceNodes = nil
		}
		if data, err = yaml.Marshal(&s); err != nil {
			n.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			n.t.Fatal(err)
		}
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		n.t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		n.t.Fatalf("inject %v: %v (unresolved %v)", ids, err, unresolved)
	}
	return spec
}

// computeInstanceProfiles lists the profile IDs of a GPU's compute
// instances, read from NVIDIA's mock objects.
func (n *machine) computeInstanceProfiles(gpu int) []int {
	var out []int
	d := n.srv.Device(gpu)
	d.RLock()
	defer d.RUnlock()
	for gi := range d.GpuInstances {
		gi.RLock()
		for ci := range gi.ComputeInstances {
			out = append(out, int(ci.Info.ProfileId))
		}
		gi.RUnlock()
	}
	slices.Sort(out)
	return out
}

// TestConfigAndVisibleDevices: a claim's configuration reaches the GPU
// (computeInstanceProfile creates one-slice compute instances) and the
// container (the time-slice, the claim's overriding its class's), and a
// container given two MIG devices of one request sees both in
// NVIDIA_VISIBLE_DEVICES. A restart that finds the CDI spec gone writes
// it again the same, from the checkpointed parameters.
func TestConfigAndVisibleDevices(t *testing.T) {
	n := newMachine(t, "dgxa100")
	ctx := context.Background()
	devs := []string{mig.MIGDeviceName(0, "3g.20gb", 0), mig.MIGDeviceName(0, "3g.20gb", 4)}
	c := configured("cfg", `"timeSlicing":{"interval":"Long"}`, `"computeInstanceProfile":"1c.3g.20gb","timeSlicing":{"interval":"Short"}`, devs...)
	answer, err := n.kit.Prepare(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	one := int(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
	if got := n.computeInstanceProfiles(0); !slices.Equal(got, []int{one, one}) {
		t.Fatalf("compute instance profiles %v, want two of one slice (%d)", got, one)
	}
	if len(answer) != 2 || len(answer[0].CDIDeviceIDs) != 2 || len(answer[1].CDIDeviceIDs) != 1 {
		t.Fatalf("answer %+v: want the request's edits with its first device only", answer)
	}
	var ids []string
	for _, d := range answer {
		ids = append(ids, d.CDIDeviceIDs...)
	}
	spec := n.inject(ids...)
	uuids := n.migDevices(0)
	if len(uuids) != 2 {
		t.Fatalf("MIG devices %v", uuids)
	}
	env := strings.Join(spec.Process.Env, "\n")
	want := []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")}
	for _, d := range devs {
		p := gpu.EnvPrefix(d)
		want = append(want, p+"TIMESLICE_INTERVAL=Short", p+"COMPUTE_INSTANCE_PROFILE=1c.3g.20gb")
	}
	for _, w := range want {
		if !slices.Contains(spec.Process.Env, w) {
			t.Errorf("container env lacks %q:\n%s", w, env)
		}
	}
	if strings.Contains(env, "Long") {
		t.Errorf("the class's interval survived the claim's:\n%s", env)
	}

	specFile, _ := filepath.Glob(filepath.Join(n.dir, "cdi", "*"+string(c.UID)+"*"))
	before, err := os.ReadFile(specFile[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(specFile[0]); err != nil {
		t.Fatal(err)
	}
	rep := n.restart()
	if !slices.Equal(rep.RewrittenSpecs, []types.UID{c.UID}) {
		t.Fatalf("reconcile rewrote %v, want the claim's spec", rep.RewrittenSpecs)
	}
	if after, err := os.ReadFile(specFile[0]); err != nil || string(after) != string(before) {
		t.Fatalf("rewritten spec differs (%v):\n%s\nwas:\n%s", err, after, before)
	}
	if err := n.kit.Unprepare(ctx, c.UID); err != nil {
		t.Fatal(err)
	}
	if got := n.instances(); len(got) != 0 {
		t.Fatalf("instances left: %v", got)
	}
}

// TestConfigRefused: a configuration the driver cannot apply refuses the
// prepare, saying where, and leaves nothing behind.
func TestConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name, claim, device, err string
		decode                   bool // refused when decoded, before anything is created
	}{
		{"unknown field", `"mps":true`, mig.MIGDeviceName(0, "3g.20gb", 0),
			`claim default/bad, request "gpu": status.allocation.devices.config[0] (FromClaim): opaque.parameters: not a gpu.dractl.dev/v1alpha1 GpuConfig: json: unknown field "mps"`, true},
		{"interval", `"timeSlicing":{"interval":"Brief"}`, mig.MIGDeviceName(0, "3g.20gb", 0),
			`timeSlicing.interval: unsupported value "Brief": expected one of Default, Short, Medium, Long`, true},
		{"another GPU instance's profile", `"computeInstanceProfile":"1c.2g.10gb"`, mig.MIGDeviceName(0, "3g.20gb", 0),
			"computeInstanceProfile 1c.2g.10gb: is for GPU instances of profile 2g.10gb, this device is a 3g.20gb", false},
		{"more slices than the GPU instance", `"computeInstanceProfile":"4c"`, mig.MIGDeviceName(0, "3g.20gb", 0),
			"computeInstanceProfile 4c: 4 compute slices, a 3g.20gb has 3", false},
		{"a whole GPU", `"computeInstanceProfile":"1c"`, mig.GPUDeviceName(1),
			"computeInstanceProfile 1c: applies to MIG devices, this is a whole GPU", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newMachine(t, "dgxa100")
			c := configured("bad", "", tc.claim, tc.device)
			_, err := n.kit.Prepare(context.Background(), c)
			var ce *prepare.ConfigError
			if err == nil || !strings.Contains(err.Error(), tc.err) || errors.As(err, &ce) != tc.decode {
				t.Fatalf("prepare: %v, want %q (a ConfigError: %v)", err, tc.err, tc.decode)
			}
			if got := n.instances(); len(got) != 0 {
				t.Fatalf("instances left: %v", got)
			}
			if ckpts, _ := os.ReadDir(filepath.Join(n.dir, "state", "claims")); len(ckpts) != 0 {
				t.Fatalf("checkpoints left: %v", ckpts)
			}
		})
	}
}
