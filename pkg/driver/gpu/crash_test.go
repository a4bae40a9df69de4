package gpu_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/internal/testing/drivertest"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// The crash tests run the driver as a child process — this test binary
// re-executed into childMain, which is gpu.Run, what the
// dractl-gpu-driver binary runs, with the claims of a fake clientset in
// place of an API server — and SIGKILL it at each failpoint.
const childEnv = "MOCKGPU_CRASH_CHILD"

func TestMain(m *testing.M) {
	drivertest.Main(m, childEnv, gpu.Run)
}

type childConfig = drivertest.Child[gpu.Config]

// node is the directories of one simulated node; the driver process comes
// and goes, they stay.
type node struct {
	*drivertest.Proc
	t                      *testing.T
	cfg                    childConfig
	stateDir, registrarDir string
}

func newNode(t *testing.T, claims ...*resourcev1.ResourceClaim) *node {
	short, err := os.MkdirTemp("", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	n := &node{t: t, stateDir: filepath.Join(short, "state"), registrarDir: filepath.Join(short, "reg")}
	for _, d := range []string{n.registrarDir, filepath.Join(short, "plugin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.cfg.Driver = gpu.Config{
		DriverName: gpu.DriverName, NodeName: "node-1", Model: "a100", GPUs: 2,
		StateDir: n.stateDir, CDIDir: filepath.Join(short, "cdi"), RegistrarDir: n.registrarDir, PluginDir: filepath.Join(short, "plugin"),
	}
	n.cfg.Node = n.cfg.Driver.NodeName
	for _, c := range claims {
		n.cfg.Claims = append(n.cfg.Claims, *c)
	}
	n.Proc = drivertest.NewProc(t, childEnv, gpu.DriverName, n.cfg.Driver.PluginDir, n.registrarDir)
	return n
}

// start runs the driver, killing itself at failpoint (if not empty), and
// waits until it serves.
func (n *node) start(failpoint prepare.Failpoint) {
	n.t.Helper()
	cfg := n.cfg
	cfg.Driver.Failpoint = string(failpoint)
	n.Start(cfg)
}

// state is what is on the node, read from its directories, not from the
// driver: MIG devices as "device@claim", CDI specs and checkpoints.
func (n *node) state() (partitions, specs, checkpoints []string) {
	n.t.Helper()
	gpus, err := gpu.New(n.cfg.Driver.DriverName, n.cfg.Driver.NodeName, n.cfg.Driver.Model, n.cfg.Driver.GPUs, filepath.Join(n.stateDir, "gpus"))
	if err != nil {
		n.t.Fatal(err)
	}
	ps, err := gpus.Partitions(context.Background())
	if err != nil {
		n.t.Fatal(err)
	}
	for _, p := range ps {
		partitions = append(partitions, p.Device+"@"+string(p.Claim))
	}
	sort.Strings(partitions)
	list := func(dir string) []string {
		entries, _ := os.ReadDir(dir)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	return partitions, list(n.cfg.Driver.CDIDir), list(filepath.Join(n.stateDir, "claims"))
}

func gpuClaim(name string, devices ...string) *resourcev1.ResourceClaim {
	var rs []resourcev1.DeviceRequestAllocationResult
	for i, d := range devices {
		rs = append(rs, at.Result(fmt.Sprintf("r%d", i), gpu.DriverName, "node-1", d))
	}
	return at.Claim(name).Allocated(rs...).Obj()
}

// TestCrashDuringPrepare kills the driver after each step of preparing a
// claim with two MIG devices, restarts it and lets the kubelet retry: the
// answer is the one an uninterrupted prepare gives, exactly one MIG device
// per allocated device exists, and nothing of the interrupted attempt is
// left over for a second claim to trip on.
func TestCrashDuringPrepare(t *testing.T) {
	a := gpuClaim("a", mig.MIGDeviceName(0, "3g.20gb", 0), mig.MIGDeviceName(1, "1g.5gb", 6))
	b := gpuClaim("b", mig.MIGDeviceName(0, "3g.20gb", 4))

	// The answer of an uninterrupted prepare, on a node of its own.
	ref := newNode(t, a)
	ref.start("")
	want, err := ref.Prepare(a)
	if err != nil || want.Error != "" {
		t.Fatalf("reference prepare: %v %v", want, err)
	}
	ref.Stop()

	for _, fp := range prepare.PrepareFailpoints {
		t.Run(string(fp), func(t *testing.T) {
			n := newNode(t, a, b)
			n.start(fp)
			if _, err := n.Prepare(a); err == nil {
				t.Fatal("prepare answered although the driver was killed before answering")
			}
			n.Killed()

			n.start("")
			got, err := n.Prepare(a)
			if err != nil || got.String() != want.String() {
				t.Fatalf("retried prepare: %v, %v; want %v", got, err, want)
			}
			gotB, err := n.Prepare(b)
			if err != nil || gotB.Error != "" {
				t.Fatalf("prepare b: %v %v", gotB, err)
			}
			parts, specs, ckpts := n.state()
			wantParts := []string{mig.MIGDeviceName(0, "3g.20gb", 0) + "@uid-a", mig.MIGDeviceName(0, "3g.20gb", 4) + "@uid-b", mig.MIGDeviceName(1, "1g.5gb", 6) + "@uid-a"}
			if !slices.Equal(parts, wantParts) || len(specs) != 2 || !slices.Equal(ckpts, []string{"uid-a.json", "uid-b.json"}) {
				t.Fatalf("node state: partitions %v, CDI specs %v, checkpoints %v", parts, specs, ckpts)
			}
			if err := n.Unprepare(a); err != nil {
				t.Fatal(err)
			}
			if parts, _, _ := n.state(); !slices.Equal(parts, wantParts[1:2]) {
				t.Fatalf("after unprepare of a: %v", parts)
			}
		})
	}
}

// TestCrashDuringUnprepare kills the driver after each step of
// unpreparing, restarts it and lets the kubelet retry: the claim ends
// unprepared, nothing leaks, and its devices can be prepared for another
// claim.
func TestCrashDuringUnprepare(t *testing.T) {
	a := gpuClaim("a", mig.MIGDeviceName(0, "2g.10gb", 0), mig.MIGDeviceName(0, "1g.5gb", 2))
	next := gpuClaim("next", mig.MIGDeviceName(0, "4g.20gb", 0))
	for _, fp := range prepare.UnprepareFailpoints {
		t.Run(string(fp), func(t *testing.T) {
			n := newNode(t, a, next)
			n.start("")
			if r, err := n.Prepare(a); err != nil || r.Error != "" {
				t.Fatalf("prepare: %v %v", r, err)
			}
			n.Stop()
			n.start(fp)
			if err := n.Unprepare(a); err == nil {
				t.Fatal("unprepare answered although the driver was killed before answering")
			}
			n.Killed()

			n.start("")
			if err := n.Unprepare(a); err != nil {
				t.Fatal(err)
			}
			if parts, specs, ckpts := n.state(); len(parts)+len(specs)+len(ckpts) != 0 {
				t.Fatalf("left behind: partitions %v, CDI specs %v, checkpoints %v", parts, specs, ckpts)
			}
			if r, err := n.Prepare(next); err != nil || r.Error != "" {
				t.Fatalf("prepare over the freed memory slices: %v %v", r, err)
			}
		})
	}
}
