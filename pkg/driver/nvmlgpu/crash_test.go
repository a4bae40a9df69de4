package nvmlgpu_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu/nvmlmock"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// The crash tests run the driver as a child process — this test binary
// re-executed into childMain, which is nvmlgpu.Run on a mock DGX A100
// whose instances outlive the process (nvmlmock.Open), with the claims of
// a fake clientset in place of an API server — and SIGKILL it at each
// failpoint. What must not leak is GPU instances: they are read back from
// the mock's file, as NVML would report them after the driver died.
const childEnv = "NVMLGPU_CRASH_CHILD"

func TestMain(m *testing.M) {
	drivertest.Main(m, childEnv, nvmlgpu.Run)
}

type childConfig = drivertest.Child[nvmlgpu.Config]

// crashNode is the directories of one simulated node, and the GPUs' state
// in one of them; the driver process comes and goes, they stay.
type crashNode struct {
	*drivertest.Proc
	t        *testing.T
	cfg      childConfig
	stateDir string
	// foreign is the GPU instance an administrator made before the
	// driver first started, as instancesOf lists it.
	foreign string
}

const crashServer = "dgxa100"

// newCrashNode makes a node whose GPU 0 already has a MIG device the
// driver did not make: a 1g.5gb at memory slice 6 with its compute
// instance.
func newCrashNode(t *testing.T, claims ...*resourcev1.ResourceClaim) *crashNode {
	short, err := os.MkdirTemp("", "nv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	n := &crashNode{t: t, stateDir: filepath.Join(short, "state")}
	for _, d := range []string{n.stateDir, filepath.Join(short, "reg"), filepath.Join(short, "plugin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.cfg.Driver = nvmlgpu.Config{
		DriverName: driver, NodeName: node, Mock: crashServer,
		StateDir: n.stateDir, CDIDir: filepath.Join(short, "cdi"), RegistrarDir: filepath.Join(short, "reg"), PluginDir: filepath.Join(short, "plugin"),
	}
	n.cfg.Node = node
	for _, c := range claims {
		n.cfg.Claims = append(n.cfg.Claims, *c)
	}

	srv := n.gpus()
	d := srv.Device(0)
	info, ret := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	gi, ret := d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 6, Size: 1})
	if ret != nvml.SUCCESS {
		t.Fatalf("foreign GPU instance: %v", ret)
	}
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
		t.Fatalf("foreign compute instance: %v", ret)
	}
	all := instancesOf(t, srv)
	if len(all) != 1 {
		t.Fatalf("mock instances after the foreign one: %v", all)
	}
	n.foreign = all[0].String()
	n.Proc = drivertest.NewProc(t, childEnv, driver, n.cfg.Driver.PluginDir, n.cfg.Driver.RegistrarDir)
	return n
}

// gpus is the node's GPUs as the file of the mock's instances has them.
func (n *crashNode) gpus() *nvmlmock.Server {
	n.t.Helper()
	srv, err := nvmlmock.Open(crashServer, nvmlgpu.MockInstances(n.stateDir))
	if err != nil {
		n.t.Fatal(err)
	}
	return srv
}

// start runs the driver, killing itself at failpoint (if not empty), and
// waits until it serves.
func (n *crashNode) start(failpoint prepare.Failpoint) {
	n.t.Helper()
	cfg := n.cfg
	cfg.Driver.Failpoint = string(failpoint)
	n.Start(cfg)
}

// startMock runs the driver, killing itself at a change of the mock's
// instances (if not empty), and waits until it serves.
func (n *crashNode) startMock(failpoint nvmlmock.Failpoint) {
	n.t.Helper()
	cfg := n.cfg
	cfg.Driver.MockFailpoint = string(failpoint)
	n.Start(cfg)
}

// gpuInstance is a GPU instance as NVML reports it.
type gpuInstance struct {
	gpuUUID     string
	id          uint32
	profile     uint32
	start, size uint32
	// migUUIDs are its compute instances' MIG devices.
	migUUIDs []string
}

func (gi gpuInstance) String() string {
	return fmt.Sprintf("%s/gi%d profile %d @%d+%d %v", gi.gpuUUID, gi.id, gi.profile, gi.start, gi.size, gi.migUUIDs)
}

// instancesOf lists the GPU instances of every GPU through NVML.
func instancesOf(t *testing.T, srv *nvmlmock.Server) []gpuInstance {
	t.Helper()
	var out []gpuInstance
	for i := range srv.Devices {
		d := srv.Device(i)
		gpuUUID, _ := d.GetUUID()
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
				e := gpuInstance{gpuUUID: gpuUUID, id: gInfo.Id, profile: gInfo.ProfileId, start: gInfo.Placement.Start, size: gInfo.Placement.Size}
				n, _ := d.GetMaxMigDeviceCount()
				for k := range n {
					h, ret := d.GetMigDeviceHandleByIndex(k)
					if ret != nvml.SUCCESS {
						continue
					}
					if g, _ := h.GetGpuInstanceId(); g == int(gInfo.Id) {
						u, _ := h.GetUUID()
						e.migUUIDs = append(e.migUUIDs, u)
					}
				}
				out = append(out, e)
			}
		}
	}
	return out
}

// record is what the driver's record of its instances says of one.
type record struct {
	GPUUUID string  `json:"gpuUUID"`
	Device  string  `json:"device"`
	Claim   string  `json:"claim"`
	Start   uint32  `json:"start"`
	Size    uint32  `json:"size"`
	GI      *uint32 `json:"gpuInstance"`
	UUID    string  `json:"uuid"`
}

// check reads the node — the mock's instances from their file, the
// driver's record of what it made and the kit's checkpoints — and fails
// unless the foreign instance is as it was, every other GPU instance is
// recorded by the driver for a claim that has a checkpoint (none leaked)
// and each claim of completed has exactly one, with its compute instance
// the recorded MIG device.
func (n *crashNode) check(completed ...*resourcev1.ResourceClaim) {
	n.t.Helper()
	var recs struct{ Instances []record }
	data, err := os.ReadFile(filepath.Join(n.stateDir, "nvml-instances.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		n.t.Fatal(err)
	}
	if err == nil {
		if err := json.Unmarshal(data, &recs); err != nil {
			n.t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(n.stateDir, "claims"))
	var checkpoints []string
	for _, e := range entries {
		checkpoints = append(checkpoints, e.Name())
	}

	foreign := false
	perClaim := map[string]int{}
	for _, gi := range instancesOf(n.t, n.gpus()) {
		if gi.String() == n.foreign {
			foreign = true
			continue
		}
		i := slices.IndexFunc(recs.Instances, func(r record) bool {
			return r.GPUUUID == gi.gpuUUID && r.Start == gi.start && r.Size == gi.size && (r.GI == nil || *r.GI == gi.id)
		})
		if i < 0 {
			n.t.Errorf("leaked: GPU instance %s is not the foreign one (%s) and not in the driver's record %+v", gi, n.foreign, recs.Instances)
			continue
		}
		r := recs.Instances[i]
		if !slices.Contains(checkpoints, r.Claim+".json") {
			n.t.Errorf("leaked: GPU instance %s is recorded for claim %s, which has no checkpoint (%v)", gi, r.Claim, checkpoints)
		}
		perClaim[r.Claim]++
		if slices.ContainsFunc(completed, func(c *resourcev1.ResourceClaim) bool { return string(c.UID) == r.Claim }) &&
			(r.GI == nil || !slices.Equal(gi.migUUIDs, []string{r.UUID})) {
			n.t.Errorf("claim %s: GPU instance %s, recorded as instance %v with MIG device %s", r.Claim, gi, r.GI, r.UUID)
		}
	}
	if !foreign {
		n.t.Errorf("the foreign GPU instance %s is gone or changed", n.foreign)
	}
	for c, k := range perClaim {
		if k != 1 {
			n.t.Errorf("claim %s has %d GPU instances, want 1", c, k)
		}
	}
	for _, c := range completed {
		if perClaim[string(c.UID)] != 1 {
			n.t.Errorf("prepared claim %s has %d GPU instances, want 1", c.UID, perClaim[string(c.UID)])
		}
	}
	if n.t.Failed() {
		n.t.FailNow()
	}
}

// TestCrashDuringPrepareLeaksNoGPUInstance kills the driver after each
// step of preparing a claim for a 3g.20gb MIG device, restarts it, which
// reconciles, and lets the kubelet retry: after the restart no GPU
// instance is leaked, after the retry the claim has exactly one, and the
// answer is the one an uninterrupted prepare gives. An administrator's
// MIG device on the same GPU stays through all of it.
func TestCrashDuringPrepareLeaksNoGPUInstance(t *testing.T) {
	a := claim("a", mig.MIGDeviceName(0, "3g.20gb", 0))

	ref := newCrashNode(t, a)
	ref.start("")
	want, err := ref.Prepare(a)
	if err != nil || want.Error != "" {
		t.Fatalf("reference prepare: %v %v", want, err)
	}
	ref.Stop()
	ref.check(a)

	for _, fp := range prepare.PrepareFailpoints {
		t.Run(string(fp), func(t *testing.T) {
			n := newCrashNode(t, a)
			n.start(fp)
			if _, err := n.Prepare(a); err == nil {
				t.Fatal("prepare answered although the driver was killed before answering")
			}
			n.Killed()
			n.check()

			n.start("")
			n.check()
			got, err := n.Prepare(a)
			if err != nil || got.String() != want.String() {
				t.Fatalf("retried prepare: %v, %v; want %v", got, err, want)
			}
			n.check(a)
			// A restart of a prepared claim's driver keeps its instance.
			n.Stop()
			n.start("")
			n.check(a)
		})
	}
}

// TestCrashDuringUnprepareLeaksNoGPUInstance kills the driver after each
// step of unpreparing the claim, restarts it and lets the kubelet retry:
// the claim's GPU instance is gone, none leaked, the administrator's MIG
// device stays, and the freed memory slices take another claim's.
func TestCrashDuringUnprepareLeaksNoGPUInstance(t *testing.T) {
	a := claim("a", mig.MIGDeviceName(0, "3g.20gb", 0))
	next := claim("next", mig.MIGDeviceName(0, "4g.20gb", 0))
	for _, fp := range prepare.UnprepareFailpoints {
		t.Run(string(fp), func(t *testing.T) {
			n := newCrashNode(t, a, next)
			n.start("")
			if r, err := n.Prepare(a); err != nil || r.Error != "" {
				t.Fatalf("prepare: %v %v", r, err)
			}
			n.Stop()
			n.check(a)
			n.start(fp)
			if err := n.Unprepare(a); err == nil {
				t.Fatal("unprepare answered although the driver was killed before answering")
			}
			n.Killed()
			n.check()

			n.start("")
			n.check()
			if err := n.Unprepare(a); err != nil {
				t.Fatal(err)
			}
			n.check()
			if got := instancesOf(t, n.gpus()); len(got) != 1 {
				t.Fatalf("after unprepare: %v, want only the foreign GPU instance", got)
			}
			if r, err := n.Prepare(next); err != nil || r.Error != "" {
				t.Fatalf("prepare over the freed memory slices: %v %v", r, err)
			}
			n.check(next)
		})
	}
}

// TestCrashBetweenNVMLCallsLeaksNoGPUInstance kills the driver between
// the NVML calls of one partition — after its GPU instance is created or
// destroyed, before its compute instance is, or the other way round —
// which no driverkit failpoint splits, restarts it and lets the kubelet
// retry: a prepare ends with exactly one GPU instance for the claim, an
// unprepare with none, nothing leaked, the administrator's MIG device
// untouched.
func TestCrashBetweenNVMLCallsLeaksNoGPUInstance(t *testing.T) {
	a := claim("a", mig.MIGDeviceName(0, "3g.20gb", 0))
	for _, fp := range nvmlmock.Failpoints {
		t.Run(string(fp), func(t *testing.T) {
			n := newCrashNode(t, a)
			creating := fp == nvmlmock.AfterGpuInstanceCreated || fp == nvmlmock.AfterComputeInstanceCreated
			if creating {
				n.startMock(fp)
				if _, err := n.Prepare(a); err == nil {
					t.Fatal("prepare answered although the driver was killed before answering")
				}
			} else {
				n.start("")
				if r, err := n.Prepare(a); err != nil || r.Error != "" {
					t.Fatalf("prepare: %v %v", r, err)
				}
				n.Stop()
				n.check(a)
				n.startMock(fp)
				if err := n.Unprepare(a); err == nil {
					t.Fatal("unprepare answered although the driver was killed before answering")
				}
			}
			n.Killed()
			n.check()

			n.start("")
			n.check()
			if !creating {
				if err := n.Unprepare(a); err != nil {
					t.Fatal(err)
				}
				n.check()
				if got := instancesOf(t, n.gpus()); len(got) != 1 {
					t.Fatalf("after unprepare: %v, want only the foreign GPU instance", got)
				}
				return
			}
			if r, err := n.Prepare(a); err != nil || r.Error != "" {
				t.Fatalf("retried prepare: %v %v", r, err)
			}
			n.check(a)
		})
	}
}
