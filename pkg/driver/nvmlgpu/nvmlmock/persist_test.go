package nvmlmock_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/dractl/dractl/pkg/driver/nvmlgpu/nvmlmock"
)

// instances lists what NVML reports of every GPU: GPU instances with
// profile and placement, and their compute instances with MIG UUIDs.
func instances(t *testing.T, s *nvmlmock.Server) []string {
	t.Helper()
	var out []string
	for i := range s.Devices {
		d := s.Device(i)
		for p := range nvml.GPU_INSTANCE_PROFILE_COUNT {
			info, ret := d.GetGpuInstanceProfileInfo(p)
			if ret != nvml.SUCCESS {
				continue
			}
			gis, ret := d.GetGpuInstances(&info)
			if ret != nvml.SUCCESS {
				t.Fatal(ret)
			}
			for _, gi := range gis {
				gInfo, _ := gi.GetInfo()
				line := fmt.Sprintf("gpu%d gi%d profile%d @%d+%d:", i, gInfo.Id, gInfo.ProfileId, gInfo.Placement.Start, gInfo.Placement.Size)
				n, _ := d.GetMaxMigDeviceCount()
				for k := range n {
					h, ret := d.GetMigDeviceHandleByIndex(k)
					if ret != nvml.SUCCESS {
						continue
					}
					if g, _ := h.GetGpuInstanceId(); g != int(gInfo.Id) {
						continue
					}
					c, _ := h.GetComputeInstanceId()
					u, _ := h.GetUUID()
					line += fmt.Sprintf(" ci%d=%s", c, u)
				}
				out = append(out, line)
			}
		}
	}
	slices.Sort(out)
	return out
}

func createMIG(t *testing.T, s *nvmlmock.Server, gpu, profile int, start, size uint32, ciProfiles ...int) nvml.GpuInstance {
	t.Helper()
	d := s.Device(gpu)
	info, ret := d.GetGpuInstanceProfileInfo(profile)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	gi, ret := d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: start, Size: size})
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU instance %d at %d on GPU %d: %v", profile, start, gpu, ret)
	}
	for _, p := range ciProfiles {
		ci, ret := gi.GetComputeInstanceProfileInfo(p, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		if _, ret := gi.CreateComputeInstance(&ci); ret != nvml.SUCCESS {
			t.Fatalf("compute instance %d: %v", p, ret)
		}
	}
	return gi
}

func open(t *testing.T, path string) *nvmlmock.Server {
	t.Helper()
	s, err := nvmlmock.Open("dgxa100", path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOpenRestoresInstances: the instances of a server made by Open are
// there, with the same IDs, placements and MIG UUIDs, in a server opened
// later on the same file, as a GPU's are after its driver restarts;
// destroying them is kept too, and so are the IDs freed in between.
func TestOpenRestoresInstances(t *testing.T) {
	path := filepath.Join(t.TempDir(), "instances.json")
	s := open(t, path)
	if got := instances(t, s); len(got) != 0 {
		t.Fatalf("a server without a file has instances: %v", got)
	}
	// IDs 0, 1, 2 on GPU 0; destroying 0 leaves 1 and 2, which a restore
	// in order would renumber were IDs not kept.
	first := createMIG(t, s, 0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 6, 1, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
	createMIG(t, s, 0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0, 4, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE)
	createMIG(t, s, 0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 4, 1)
	createMIG(t, s, 3, nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0, 8, nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE)
	ever := uuidsOf(instances(t, s))
	if err := destroyAll(first); err != nil {
		t.Fatal(err)
	}
	want := instances(t, s)
	if len(want) != 3 || !strings.HasPrefix(want[0], "gpu0 gi1 ") || !strings.HasPrefix(want[1], "gpu0 gi2 ") {
		t.Fatalf("before reopening: %v", want)
	}

	r := open(t, path)
	if got := instances(t, r); !slices.Equal(got, want) {
		t.Fatalf("reopened:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The hardware's checks hold over restored instances, and a new MIG
	// device gets a UUID no earlier one had.
	d := r.Device(0)
	info, _ := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if _, ret := d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 4, Size: 1}); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Fatalf("GPU instance over a restored one: %v", ret)
	}
	gi := createMIG(t, r, 0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 6, 1, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
	if gInfo, _ := gi.GetInfo(); gInfo.Id != 0 {
		t.Fatalf("new GPU instance has ID %d, want the freed 0", gInfo.Id)
	}
	var fresh []string
	for _, u := range uuidsOf(instances(t, r)) {
		if !slices.Contains(uuidsOf(want), u) {
			fresh = append(fresh, u)
		}
	}
	if len(fresh) != 1 || slices.Contains(ever, fresh[0]) {
		t.Fatalf("new MIG UUIDs %v, want one that none of %v had", fresh, ever)
	}

	// Destroying everything on the reopened server is kept too.
	for i := range r.Devices {
		for p := range nvml.GPU_INSTANCE_PROFILE_COUNT {
			info, ret := r.Device(i).GetGpuInstanceProfileInfo(p)
			if ret != nvml.SUCCESS {
				continue
			}
			gis, _ := r.Device(i).GetGpuInstances(&info)
			for _, gi := range gis {
				if err := destroyAll(gi); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if got := instances(t, open(t, path)); len(got) != 0 {
		t.Fatalf("destroyed instances came back: %v", got)
	}
}

// TestOpenRefusesImpossibleFiles: a file no GPU could hold is an error
// naming the field, not a server believing it.
func TestOpenRefusesImpossibleFiles(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"other server", `{"version":1,"server":"dgxh100"}`, `server: expected "dgxa100", found "dgxh100"`},
		{"other version", `{"version":2,"server":"dgxa100"}`, "version: expected 1, found 2"},
		{"no such GPU", `{"version":1,"server":"dgxa100","gpus":[{"index":8}]}`, "gpus[0].index: expected 0 to 7, found 8"},
		{"overlap", `{"version":1,"server":"dgxa100","gpus":[{"index":0,"gpuInstances":[
			{"id":0,"profileID":0,"start":0,"size":1},{"id":1,"profileID":2,"start":0,"size":4}]}]}`,
			"gpus[0].gpuInstances[1]: GPU instance 1 of profile 2 at 0+4: ERROR_INSUFFICIENT_RESOURCES"},
		{"same ID twice", `{"version":1,"server":"dgxa100","gpus":[{"index":0,"gpuInstances":[
			{"id":3,"profileID":0,"start":0,"size":1},{"id":3,"profileID":0,"start":1,"size":1}]}]}`,
			"gpus[0].gpuInstances[1]: GPU instance 3"},
		{"no UUID", `{"version":1,"server":"dgxa100","gpus":[{"index":0,"gpuInstances":[
			{"id":0,"profileID":0,"start":0,"size":1,"computeInstances":[{"id":0,"profileID":0}]}]}]}`,
			"gpus[0].gpuInstances[0].computeInstances[0].uuid: expected a MIG UUID, found none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "instances.json")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := nvmlmock.Open("dgxa100", path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// destroyAll destroys a GPU instance's compute instances, then it.
func destroyAll(gi nvml.GpuInstance) error {
	for p := range nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
		info, ret := gi.GetComputeInstanceProfileInfo(p, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			continue
		}
		cis, _ := gi.GetComputeInstances(&info)
		for _, ci := range cis {
			if ret := ci.Destroy(); ret != nvml.SUCCESS {
				return fmt.Errorf("destroy compute instance: %v", ret)
			}
		}
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		return fmt.Errorf("destroy GPU instance: %v", ret)
	}
	return nil
}

func uuidsOf(lines []string) []string {
	var out []string
	for _, line := range lines {
		for _, f := range strings.Fields(line) {
			if _, u, ok := strings.Cut(f, "="); ok {
				out = append(out, u)
			}
		}
	}
	return out
}

// TestKillAtRefusesUnknownFailpoints: a misspelt failpoint is an error,
// not a crash test that never crashes.
func TestKillAtRefusesUnknownFailpoints(t *testing.T) {
	s, err := nvmlmock.New("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.KillAt("gpu-instance-made"); err == nil || !strings.Contains(err.Error(), `unknown mock NVML failpoint "gpu-instance-made"`) {
		t.Fatalf("KillAt: %v", err)
	}
	for _, f := range append(nvmlmock.Failpoints, "") {
		if err := s.KillAt(string(f)); err != nil {
			t.Fatalf("KillAt(%q): %v", f, err)
		}
	}
}
