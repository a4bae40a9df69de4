package nvmlgpu_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu/nvmlmock"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// machine is one node: NVIDIA's mock server stands for the GPUs and keeps
// its instances across driver restarts, as GPUs do; the driver (profile
// and kit) comes and goes over the same directories.
type machine struct {
	t    testing.TB
	srv  *nvmlmock.Server
	dir  string
	gpus *nvmlgpu.GPUs
	kit  *prepare.Kit
	// devRoot is the driver's Options.DevRoot.
	devRoot string
}

func newMachine(t testing.TB, server string) *machine {
	t.Helper()
	srv, err := nvmlmock.New(server)
	if err != nil {
		t.Fatal(err)
	}
	n := &machine{t: t, srv: srv, dir: t.TempDir()}
	if err := srv.WriteMigMinors(filepath.Join(n.dir, "mig-minors")); err != nil {
		t.Fatal(err)
	}
	// The mock kernel driver's device nodes, which prepares check for.
	n.devRoot = filepath.Join(n.dir, "root")
	if err := srv.WriteDeviceNodes(filepath.Join(n.devRoot, "dev")); err != nil {
		t.Fatal(err)
	}
	n.restart()
	return n
}

// restart starts a new driver over the same GPUs and directories, and
// reconciles, as the driver does at start.
func (n *machine) restart() *prepare.ReconcileReport {
	n.t.Helper()
	gpus, err := nvmlgpu.New(n.srv, nvmlgpu.Options{Driver: driver, Node: node, StateDir: filepath.Join(n.dir, "state"),
		MigMinors: filepath.Join(n.dir, "mig-minors"), DevRoot: n.devRoot}, logr.Discard())
	if err != nil {
		n.t.Fatal(err)
	}
	kit, rep := drivertest.NewKit(n.t, prepare.Config{DriverName: driver, Profile: gpus, StateDir: filepath.Join(n.dir, "state"), CDIDir: filepath.Join(n.dir, "cdi"), CDIClass: "gpu"},
		node, gpus.Pool())
	n.gpus, n.kit = gpus, kit
	return rep
}

// instances lists the GPU instances NVIDIA's mock holds, read from its
// own objects: "gpu<i>/<profile id>@<start>+<size>/<compute instances>".
func (n *machine) instances() []string {
	var out []string
	for i := range n.srv.Devices {
		d := n.srv.Device(i)
		d.RLock()
		for gi := range d.GpuInstances {
			gi.RLock()
			out = append(out, fmt.Sprintf("gpu%d/%d@%d+%d/%dci", i, gi.Info.ProfileId, gi.Info.Placement.Start, gi.Info.Placement.Size, len(gi.ComputeInstances)))
			gi.RUnlock()
		}
		d.RUnlock()
	}
	slices.Sort(out)
	return out
}

// foreign creates a MIG device through NVML as an administrator would
// (nvidia-smi mig -cgi <profile>:<start> -C).
func (n *machine) foreign(gpu, profile int, start, size uint32) {
	n.t.Helper()
	d := n.srv.Device(gpu)
	info, ret := d.GetGpuInstanceProfileInfo(profile)
	if ret != nvml.SUCCESS {
		n.t.Fatal(ret)
	}
	gi, ret := d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: start, Size: size})
	if ret != nvml.SUCCESS {
		n.t.Fatalf("foreign GPU instance: %v", ret)
	}
	ci, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		n.t.Fatal(ret)
	}
	if _, ret := gi.CreateComputeInstance(&ci); ret != nvml.SUCCESS {
		n.t.Fatal(ret)
	}
}

func claim(name string, devices ...string) *resourcev1.ResourceClaim {
	return drivertest.Claim(driver, node, name, devices...)
}

func (n *machine) spec(uid types.UID) *cdispec.Spec {
	n.t.Helper()
	matches, _ := filepath.Glob(filepath.Join(n.dir, "cdi", "*"+string(uid)+"*"))
	if len(matches) != 1 {
		n.t.Fatalf("CDI specs of %s: %v", uid, matches)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		n.t.Fatal(err)
	}
	var s cdispec.Spec
	if err := yaml.Unmarshal(data, &s); err != nil {
		n.t.Fatal(err)
	}
	return &s
}

// migDevices lists the UUIDs of the MIG devices NVML reports on a GPU.
func (n *machine) migDevices(gpu int) []string {
	d := n.srv.Device(gpu)
	max, _ := d.GetMaxMigDeviceCount()
	var out []string
	for i := range max {
		h, ret := d.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		u, _ := h.GetUUID()
		out = append(out, u)
	}
	return out
}

// TestDeviceNodesUnderDevRoot: the CDI edits give every device node its
// path under the NVIDIA driver's root on the host and under /dev in the
// container; a root without the nodes (the kernel driver not loaded)
// fails the prepare, naming the missing node, and leaves nothing behind,
// instead of a claim reported prepared whose containers cannot be
// created.
func TestDeviceNodesUnderDevRoot(t *testing.T) {
	n := newMachine(t, "dgxa100")
	ctx := context.Background()
	c := claim("a", mig.MIGDeviceName(0, "1g.5gb", 2))
	if _, err := n.kit.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	nodes := n.spec(c.UID).Devices[0].ContainerEdits.DeviceNodes
	if len(nodes) != 6 {
		t.Fatalf("device nodes %+v, want the control, two UVM, the GPU's and two capability nodes", nodes)
	}
	for _, dn := range nodes {
		if !strings.HasPrefix(dn.Path, "/dev/") || dn.HostPath != n.devRoot+dn.Path {
			t.Errorf("device node %s on the host at %q, want under %s", dn.Path, dn.HostPath, n.devRoot)
		}
	}
	if err := n.kit.Unprepare(ctx, c.UID); err != nil {
		t.Fatal(err)
	}

	n.devRoot = t.TempDir()
	n.restart()
	_, err := n.kit.Prepare(ctx, c)
	if want := "device node /dev/nvidiactl is not on this host (" + n.devRoot + "/dev/nvidiactl)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("prepare without device nodes: %v, want %q", err, want)
	}
	if got := n.instances(); len(got) != 0 {
		t.Fatalf("instances %v left by the failed prepare", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(n.dir, "cdi")); len(entries) != 0 {
		t.Fatalf("CDI specs %v left by the failed prepare", entries)
	}
}

// TestPrepareCreatesMIGDevices: prepare creates a GPU instance at the
// allocated placement with one compute instance over it, and the CDI spec
// names the MIG device as NVIDIA's toolkit expects; unprepare destroys
// both (the server refuses to destroy a GPU instance that still has a
// compute instance, so the order is checked too).
func TestPrepareCreatesMIGDevices(t *testing.T) {
	n := newMachine(t, "dgxa100")
	ctx := context.Background()
	c := claim("a", mig.MIGDeviceName(0, "1g.5gb", 2), mig.MIGDeviceName(1, "3g.20gb", 4))
	if _, err := n.kit.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, want := n.instances(), []string{"gpu0/0@2+1/1ci", "gpu1/2@4+4/1ci"}; !slices.Equal(got, want) {
		t.Fatalf("instances %v, want %v", got, want)
	}
	spec := n.spec(c.UID)
	// A device each, and each request's NVIDIA_VISIBLE_DEVICES.
	if len(spec.Devices) != 4 {
		t.Fatalf("%d CDI devices, want 4", len(spec.Devices))
	}
	minors, err := os.ReadFile(filepath.Join(n.dir, "mig-minors"))
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range spec.Devices[:2] {
		uuids := n.migDevices(i)
		if len(uuids) != 1 || !strings.HasPrefix(uuids[0], "MIG-") {
			t.Fatalf("GPU %d MIG devices %v", i, uuids)
		}
		if want := []string{"NVIDIA_VISIBLE_DEVICES=" + uuids[0]}; !slices.Equal(spec.Devices[2+i].ContainerEdits.Env, want) {
			t.Errorf("%s: env %v, want %v", spec.Devices[2+i].Name, spec.Devices[2+i].ContainerEdits.Env, want)
		}
		var paths []string
		for _, dn := range d.ContainerEdits.DeviceNodes {
			paths = append(paths, dn.Path)
			if dn.HostPath != n.devRoot+dn.Path {
				t.Errorf("%s: device node %s at host path %q, want under %s", d.Name, dn.Path, dn.HostPath, n.devRoot)
			}
		}
		// The first GPU instance of each GPU gets ID 0, its compute
		// instance 0: the kernel driver's table names their minors.
		var want []string
		for _, name := range []string{fmt.Sprintf("gpu%d/gi0/access ", i), fmt.Sprintf("gpu%d/gi0/ci0/access ", i)} {
			_, rest, _ := strings.Cut(string(minors), name)
			minor, _, _ := strings.Cut(rest, "\n")
			want = append(want, "/dev/nvidia-caps/nvidia-cap"+minor)
		}
		want = append([]string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", fmt.Sprintf("/dev/nvidia%d", i)}, want...)
		if !slices.Equal(paths, want) {
			t.Errorf("%s: device nodes %v, want %v", d.Name, paths, want)
		}
	}
	// Preparing again answers from the checkpoint and creates nothing.
	if _, err := n.kit.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := n.instances(); len(got) != 2 {
		t.Fatalf("instances after a second prepare: %v", got)
	}
	if err := n.kit.Unprepare(ctx, c.UID); err != nil {
		t.Fatal(err)
	}
	if got := n.instances(); len(got) != 0 {
		t.Fatalf("instances left after unprepare: %v", got)
	}
}

// TestWholeGPU: the whole GPU creates nothing, names the GPU, and keeps
// MIG devices off it while it is prepared.
func TestWholeGPU(t *testing.T) {
	n := newMachine(t, "dgxa100")
	ctx := context.Background()
	c := claim("whole", mig.GPUDeviceName(1))
	if _, err := n.kit.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := n.instances(); len(got) != 0 {
		t.Fatalf("instances %v", got)
	}
	if env := n.spec(c.UID).Devices[1].ContainerEdits.Env; !slices.Contains(env, "NVIDIA_VISIBLE_DEVICES="+n.srv.Device(1).UUID) {
		t.Errorf("env %v does not name GPU 1", env)
	}
	_, err := n.gpus.CreatePartition(ctx, "other", prepare.AllocatedDevice{Pool: node, Device: mig.MIGDeviceName(1, "1g.5gb", 0)})
	if err == nil || !strings.Contains(err.Error(), "insufficient resources on GPU 1") {
		t.Fatalf("MIG device on a prepared whole GPU: %v", err)
	}
	if err := n.kit.Unprepare(ctx, c.UID); err != nil {
		t.Fatal(err)
	}
	n.foreign(1, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 6, 1)
	if _, err := n.kit.Prepare(ctx, c); err == nil || !strings.Contains(err.Error(), "MIG GPU instances") {
		t.Fatalf("whole GPU with a foreign MIG device: %v", err)
	}
}

// TestNVMLRefusesOverlaps: the hardware's refusal reaches the kit's
// caller when the kit's own check is bypassed (the profile called
// directly), and of concurrent creates of overlapping placements exactly
// one wins.
func TestNVMLRefusesOverlaps(t *testing.T) {
	n := newMachine(t, "dgxa100")
	ctx := context.Background()
	devs := []string{
		mig.MIGDeviceName(0, "7g.40gb", 0), mig.MIGDeviceName(0, "4g.20gb", 0), mig.MIGDeviceName(0, "3g.20gb", 0),
		mig.MIGDeviceName(0, "2g.10gb", 0), mig.MIGDeviceName(0, "1g.10gb", 0), mig.MIGDeviceName(0, "1g.5gb", 0),
		mig.MIGDeviceName(0, "1g.5gb+me", 0), mig.MIGDeviceName(0, "1g.5gb", 1),
	}
	var wg sync.WaitGroup
	errs := make([]error, len(devs))
	for i, d := range devs {
		wg.Go(func() {
			_, errs[i] = n.gpus.CreatePartition(ctx, types.UID(fmt.Sprintf("uid-%d", i)), prepare.AllocatedDevice{Pool: node, Device: d})
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, nvml.ERROR_INSUFFICIENT_RESOURCES):
			t.Errorf("%s: %v, want NVML's insufficient resources", devs[i], err)
		}
	}
	// 1g.5gb at 1 overlaps only the 7g, 4g, 3g, 2g and 1g.10gb: it may
	// win beside a 1g.5gb(+me) at 0.
	if got := n.instances(); won != len(got) || won < 1 || won > 2 {
		t.Fatalf("%d creates won, instances %v", won, got)
	}
	ps, err := n.gpus.Partitions(ctx)
	if err != nil || len(ps) != won {
		t.Fatalf("partitions %v (%v), want %d", ps, err, won)
	}
}

// TestConcurrentOverlappingPreparesOneWins: claims of overlapping
// placements prepared at once through the kit: one is prepared, the
// others refused, one GPU instance exists.
func TestConcurrentOverlappingPreparesOneWins(t *testing.T) {
	n := newMachine(t, "dgxh100")
	ctx := context.Background()
	devs := []string{mig.MIGDeviceName(2, "7g.80gb", 0), mig.MIGDeviceName(2, "4g.40gb", 0), mig.MIGDeviceName(2, "3g.40gb", 0),
		mig.MIGDeviceName(2, "2g.20gb", 0), mig.MIGDeviceName(2, "1g.10gb", 0), mig.MIGDeviceName(2, "1g.20gb", 0)}
	var wg sync.WaitGroup
	errs := make([]error, len(devs))
	for i, d := range devs {
		wg.Go(func() { _, errs[i] = n.kit.Prepare(ctx, claim(fmt.Sprintf("c%d", i), d)) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		}
	}
	if got := n.instances(); won != 1 || len(got) != 1 {
		t.Fatalf("%d prepares won (%v), instances %v", won, errs, got)
	}
}

// TestReconcileKeepsOwnedDestroysOrphansNeverForeign: after a restart the
// instances of completed claims stay, the driver's instances of claims
// that no longer exist are destroyed — also one whose create was
// interrupted before its ID was recorded — and instances the driver did
// not create are never touched.
func TestReconcileKeepsOwnedDestroysOrphansNeverForeign(t *testing.T) {
	n := newMachine(t, "dgxa100")
	ctx := context.Background()
	n.foreign(0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 6, 1)
	n.foreign(3, nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0, 8)
	kept := claim("kept", mig.MIGDeviceName(0, "3g.20gb", 0))
	if _, err := n.kit.Prepare(ctx, kept); err != nil {
		t.Fatal(err)
	}
	// Two instances of claims the kubelet forgot: one recorded in full,
	// one as a create interrupted right after the GPU instance existed.
	for i, d := range []string{mig.MIGDeviceName(1, "2g.10gb", 2), mig.MIGDeviceName(2, "1g.10gb", 4)} {
		if _, err := n.gpus.CreatePartition(ctx, types.UID(fmt.Sprintf("gone-%d", i)), prepare.AllocatedDevice{Pool: node, Device: d}); err != nil {
			t.Fatal(err)
		}
	}
	statePath := filepath.Join(n.dir, "state", "nvml-instances.json")
	data, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	for _, in := range st["instances"].([]any) {
		if rec := in.(map[string]any); rec["claim"] == "gone-1" {
			for _, k := range []string{"gpuInstance", "computeInstance", "uuid", "capMinors"} {
				delete(rec, k)
			}
		}
	}
	if data, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statePath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before := n.instances()
	if len(before) != 5 {
		t.Fatalf("instances before restart: %v", before)
	}

	rep := n.restart()
	var destroyed []string
	for _, p := range rep.Destroyed {
		destroyed = append(destroyed, p.Device+"@"+string(p.Claim))
	}
	slices.Sort(destroyed)
	if want := []string{mig.MIGDeviceName(1, "2g.10gb", 2) + "@gone-0", mig.MIGDeviceName(2, "1g.10gb", 4) + "@gone-1"}; !slices.Equal(destroyed, want) {
		t.Errorf("destroyed %v, want %v", destroyed, want)
	}
	if got, want := n.instances(), []string{"gpu0/0@6+1/1ci", "gpu0/2@0+4/1ci", "gpu3/4@0+8/1ci"}; !slices.Equal(got, want) {
		t.Errorf("instances after reconcile %v, want the kept claim's and both foreign ones %v", got, want)
	}
	if !slices.Equal(rep.Prepared, []types.UID{kept.UID}) {
		t.Errorf("prepared %v", rep.Prepared)
	}
	// The kept claim unprepares; the foreign instances still stay.
	if err := n.kit.Unprepare(ctx, kept.UID); err != nil {
		t.Fatal(err)
	}
	if got, want := n.instances(), []string{"gpu0/0@6+1/1ci", "gpu3/4@0+8/1ci"}; !slices.Equal(got, want) {
		t.Errorf("instances after unprepare %v, want %v", got, want)
	}
}

// TestStateFileVersion: a record of another version is refused, not
// misread.
func TestStateFileVersion(t *testing.T) {
	srv, err := nvmlmock.New("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nvml-instances.json"), []byte(`{"version":2,"instances":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = nvmlgpu.New(srv, nvmlgpu.Options{Driver: driver, Node: node, StateDir: dir}, logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "version 2, this driver reads version 1") {
		t.Fatalf("New: %v", err)
	}
}

// TestXIDMarksTheGPUUnhealthy: an XID critical error from NVML's event set
// makes every device of its GPU unhealthy; application XIDs do not.
func TestXIDMarksTheGPUUnhealthy(t *testing.T) {
	n := newMachine(t, "dgxa100")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- n.gpus.WatchHealth(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// The watcher registers its event set before it waits; until then
	// an injected error has nowhere to go, so inject until one lands.
	var bad map[prepare.DeviceKey]string
	for deadline := time.Now().Add(30 * time.Second); len(bad) == 0 && time.Now().Before(deadline); {
		if err := n.srv.InjectXID(1, 13); err != nil { // an application fault
			t.Fatal(err)
		}
		if err := n.srv.InjectXID(2, 79); err != nil { // fallen off the bus
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		var err error
		if bad, err = n.gpus.Health(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(bad) != mig.A100.DevicesPerGPU() {
		t.Fatalf("%d unhealthy devices, want GPU 2's %d: %v", len(bad), mig.A100.DevicesPerGPU(), bad)
	}
	for k, reason := range bad {
		if !strings.HasPrefix(k.Device, "gpu-2") || reason != "XID 79" {
			t.Errorf("%s unhealthy (%s)", k, reason)
		}
	}
}
