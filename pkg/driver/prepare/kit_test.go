package prepare_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

const (
	driver = gpu.DriverName
	node   = drivertest.MockNodeName
)

// env is a node of the mock GPU backend.
type env = drivertest.MockNode

func newEnv(t *testing.T) *env { return drivertest.NewMockNode(t) }

// claim is an allocated claim of the given MIG devices of this node.
func claim(name string, devices ...string) *resourcev1.ResourceClaim {
	return drivertest.Claim(driver, node, name, devices...)
}

func migDev(gpu int, profile string, start int) string { return mig.MIGDeviceName(gpu, profile, start) }

func TestPrepareCreatesPartitionAndCDISpec(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := claim("a", migDev(0, "1g.5gb", 0), migDev(1, "3g.20gb", 4))
	got, err := e.Kit.Prepare(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{migDev(0, "1g.5gb", 0) + "@uid-a", migDev(1, "3g.20gb", 4) + "@uid-a"}; !slices.Equal(e.Partitions(), want) {
		t.Fatalf("partitions %v, want %v", e.Partitions(), want)
	}
	if len(got) != 2 || got[0].DeviceName != migDev(0, "1g.5gb", 0) || got[0].PoolName != node || !slices.Equal(got[0].Requests, []string{"r0"}) {
		t.Fatalf("answer %+v", got)
	}
	wantID := driver + "/gpu=uid-a-" + migDev(0, "1g.5gb", 0)
	if !slices.Equal(got[0].CDIDeviceIDs, []string{wantID}) {
		t.Fatalf("CDI IDs %v, want [%s]", got[0].CDIDeviceIDs, wantID)
	}

	// What a container runtime does with the IDs: inject them into the
	// container's OCI spec from the spec files alone.
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(filepath.Join(e.Dir, "cdi")), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, got[0].CDIDeviceIDs[0], got[1].CDIDeviceIDs[0]); err != nil {
		t.Fatalf("inject: %v (unresolved %v)", err, unresolved)
	}
	env := strings.Join(spec.Process.Env, "\n")
	p0 := gpu.EnvPrefix(migDev(0, "1g.5gb", 0))
	for _, want := range []string{p0 + "PROFILE=1g.5gb", p0 + "GPU_INDEX=0", p0 + "GPU_UUID=" + e.GPUs.GPUUUID(0), p0 + "UUID=MIG-", p0 + "CLAIM=uid-a",
		gpu.EnvPrefix(migDev(1, "3g.20gb", 4)) + "PROFILE=3g.20gb"} {
		if !strings.Contains(env, want) {
			t.Errorf("container env lacks %q:\n%s", want, env)
		}
	}
	var nodes []string
	for _, d := range spec.Linux.Devices {
		nodes = append(nodes, d.Path)
	}
	if !slices.Contains(nodes, "/dev/nvidia0") || !slices.Contains(nodes, "/dev/nvidia1") || len(nodes) != 4 {
		t.Errorf("device nodes %v: want /dev/nvidia0, /dev/nvidia1 and two MIG capability nodes", nodes)
	}
	if len(spec.Mounts) != 2 || spec.Mounts[0].Destination != "/var/run/dractl-gpu/"+migDev(0, "1g.5gb", 0)+".json" {
		t.Errorf("mounts %+v", spec.Mounts)
	}
}

func TestPrepareIsIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := claim("a", migDev(0, "2g.10gb", 2))
	first, err := e.Kit.Prepare(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := e.Kit.Prepare(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("second answer %v, first %v", again, first)
		}
	}
	e.Restart()
	again, err := e.Kit.Prepare(ctx, c)
	if err != nil || fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("after restart: %v, %v; first %v", again, err, first)
	}
	if got := e.Partitions(); len(got) != 1 {
		t.Fatalf("partitions %v, want exactly one", got)
	}
}

func TestUnprepareIsIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := claim("a", migDev(0, "7g.40gb", 0))
	if _, err := e.Kit.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := e.Kit.Unprepare(ctx, c.UID); err != nil {
			t.Fatalf("unprepare %d: %v", i, err)
		}
	}
	if p, s := e.Partitions(), e.Specs(); len(p)+len(s) != 0 {
		t.Fatalf("left behind: partitions %v, CDI specs %v", p, s)
	}
	if err := e.Kit.Unprepare(ctx, "never-prepared"); err != nil {
		t.Fatal(err)
	}
	// The freed partition can be prepared for the next claim.
	if _, err := e.Kit.Prepare(ctx, claim("b", migDev(0, "1g.10gb", 0))); err != nil {
		t.Fatal(err)
	}
}

// TestConflicts: the kit refuses what another claim holds, by device and
// by counters (overlapping memory slices, scarce engines), and names the
// holder; a refused prepare leaves nothing behind.
func TestConflicts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		held, asked []string
		want        string // substring of the error; "" = allowed
	}{
		{"same device", []string{migDev(0, "1g.5gb", 3)}, []string{migDev(0, "1g.5gb", 3)}, "is already prepared (held by claim uid-held)"},
		{"overlapping memory slices", []string{migDev(0, "3g.20gb", 0)}, []string{migDev(0, "1g.5gb", 2)}, "counter memory-slice-2 of gpu-0-counter-set would be 2 of 1 (held by claim uid-held)"},
		{"whole GPU under a partition", []string{migDev(1, "1g.5gb", 6)}, []string{mig.GPUDeviceName(1)}, "overlaps a prepared partition"},
		{"one JPEG engine", []string{migDev(0, "1g.5gb+me", 0)}, []string{migDev(0, "1g.5gb+me", 1)}, "counter jpeg-engines"},
		{"two devices of one claim overlap", nil, []string{migDev(0, "4g.20gb", 0), migDev(0, "2g.10gb", 2)}, "overlaps a prepared partition"},
		{"unpublished device", nil, []string{"gpu-7"}, "is not published by this driver"},
		{"other GPU", []string{mig.GPUDeviceName(0)}, []string{mig.GPUDeviceName(1)}, ""},
		{"neighbouring slices", []string{migDev(0, "3g.20gb", 0)}, []string{migDev(0, "3g.20gb", 4)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			if tc.held != nil {
				if _, err := e.Kit.Prepare(ctx, claim("held", tc.held...)); err != nil {
					t.Fatal(err)
				}
			}
			before := e.Partitions()
			_, err := e.Kit.Prepare(ctx, claim("asked", tc.asked...))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var conflict *prepare.PrepareConflictError
			if !errors.As(err, &conflict) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a PrepareConflictError with %q", err, tc.want)
			}
			if after := e.Partitions(); !slices.Equal(after, before) {
				t.Errorf("partitions %v after a refused prepare, before %v", after, before)
			}
			// Once the holder is gone the claim fits (unless it conflicts
			// with itself or names no device).
			if tc.held != nil {
				if err := e.Kit.Unprepare(ctx, "uid-held"); err != nil {
					t.Fatal(err)
				}
				if _, err := e.Kit.Prepare(ctx, claim("asked", tc.asked...)); err != nil {
					t.Fatalf("after the holder left: %v", err)
				}
			}
		})
	}
}

// TestConcurrentOverlappingPrepares: claims racing for overlapping
// partitions of one GPU; exactly one wins, every other gets a conflict,
// and exactly one partition exists.
func TestConcurrentOverlappingPrepares(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	contenders := []string{migDev(0, "7g.40gb", 0), migDev(0, "4g.20gb", 0), migDev(0, "3g.20gb", 0), migDev(0, "2g.10gb", 2), migDev(0, "1g.10gb", 2), migDev(0, "1g.5gb", 3), mig.GPUDeviceName(0)}
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, len(contenders))
		for i, d := range contenders {
			wg.Go(func() {
				_, errs[i] = e.Kit.Prepare(ctx, claim(fmt.Sprintf("c%d-%d", round, i), d))
			})
		}
		wg.Wait()
		winners := 0
		for _, err := range errs {
			var conflict *prepare.PrepareConflictError
			switch {
			case err == nil:
				winners++
			case !errors.As(err, &conflict):
				t.Fatalf("round %d: %v is not a conflict", round, err)
			}
		}
		if winners != 1 || len(e.Partitions()) != 1 {
			t.Fatalf("round %d: %d winners, partitions %v", round, winners, e.Partitions())
		}
		for i, err := range errs {
			if err == nil {
				if err := e.Kit.Unprepare(ctx, types.UID(fmt.Sprintf("uid-c%d-%d", round, i))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestCorruptCheckpoint: a checkpoint with a bad checksum or cut short is
// reported with its path, never trusted; at restart it is moved aside and
// the claim's partition destroyed, so nothing leaks; the claim can then be
// prepared again from scratch.
func TestCorruptCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		damage     func([]byte) []byte
	}{
		{"bad checksum", "checksum", func(b []byte) []byte {
			i := strings.Index(string(b), "PrepareCompleted")
			b[i] = 'X'
			return b
		}},
		{"truncated", "not a checkpoint", func(b []byte) []byte { return b[:len(b)/2] }},
		{"empty", "not a checkpoint (0 bytes)", func([]byte) []byte { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			c := claim("a", migDev(0, "2g.10gb", 0))
			if _, err := e.Kit.Prepare(ctx, c); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(e.Dir, "claims", "uid-a.json")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.damage(data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = e.Kit.Prepare(ctx, c)
			var corrupt *prepare.CorruptCheckpointError
			if !errors.As(err, &corrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("prepare: %v, want a corrupt-checkpoint error naming %s and %q", err, path, tc.want)
			}
			rep := e.Restart()
			if len(rep.Corrupt) != 1 || len(rep.Destroyed) != 1 || len(rep.RemovedSpecs) != 1 {
				t.Fatalf("reconcile: %d corrupt, destroyed %v, removed specs %v", len(rep.Corrupt), rep.Destroyed, rep.RemovedSpecs)
			}
			if p := e.Partitions(); len(p) != 0 {
				t.Fatalf("leaked partitions %v", p)
			}
			if _, err := os.Stat(path + ".corrupt"); err != nil {
				t.Errorf("corrupt checkpoint not kept aside: %v", err)
			}
			if _, err := e.Kit.Prepare(ctx, c); err != nil {
				t.Fatal(err)
			}
			if p := e.Partitions(); len(p) != 1 {
				t.Fatalf("partitions %v, want one", p)
			}
		})
	}
}

// TestUnprepareWithCorruptCheckpoint: the partitions the hardware
// attributes to the claim go even when its record cannot be read.
func TestUnprepareWithCorruptCheckpoint(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := claim("a", migDev(1, "1g.10gb", 4))
	if _, err := e.Kit.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Dir, "claims", "uid-a.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.Kit.Unprepare(ctx, c.UID); err != nil {
		t.Fatal(err)
	}
	if p, s := e.Partitions(), e.Specs(); len(p)+len(s) != 0 {
		t.Fatalf("left behind: %v %v", p, s)
	}
}

// TestReconcileDestroysUnownedPartitions: a MIG device created out of band
// or by a prepare that never recorded it goes; prepared claims keep theirs
// and are held against new claims.
func TestReconcileDestroysUnownedPartitions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.Kit.Prepare(ctx, claim("kept", migDev(0, "3g.20gb", 4))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GPUs.CreatePartition(ctx, "uid-stranger", prepare.AllocatedDevice{Pool: node, Device: migDev(1, "1g.5gb", 0)}); err != nil {
		t.Fatal(err)
	}
	rep := e.Restart()
	if len(rep.Destroyed) != 1 || rep.Destroyed[0].Claim != "uid-stranger" || !slices.Equal(rep.Prepared, []types.UID{"uid-kept"}) {
		t.Fatalf("report %+v", rep)
	}
	if want := []string{migDev(0, "3g.20gb", 4) + "@uid-kept"}; !slices.Equal(e.Partitions(), want) {
		t.Fatalf("partitions %v, want %v", e.Partitions(), want)
	}
	_, err := e.Kit.Prepare(ctx, claim("late", migDev(0, "1g.5gb", 5)))
	if !strings.Contains(fmt.Sprint(err), "held by claim uid-kept") {
		t.Fatalf("prepare over a restored claim: %v", err)
	}
}

// TestCDISpecsOutliveTheRuntimeDirectory: a node's CDI directory is a
// tmpfs (/var/run/cdi), which a reboot empties, and a spec file can be
// damaged; the runtime resolves a prepared claim's devices only from its
// spec. A restarted driver writes every prepared claim's spec again where
// it is missing or differs, and so does the kubelet's repeated prepare of
// a prepared claim (it asks again after its own restart) without a
// driver restart; an intact spec is left alone.
func TestCDISpecsOutliveTheRuntimeDirectory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := claim("a", migDev(0, "3g.20gb", 4)), claim("b", migDev(1, "1g.5gb", 0))
	for _, c := range []*resourcev1.ResourceClaim{a, b} {
		if _, err := e.Kit.Prepare(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	specs := e.Specs()
	read := func() map[string]string {
		out := map[string]string{}
		for _, name := range e.Specs() {
			data, err := os.ReadFile(filepath.Join(e.Dir, "cdi", name))
			if err != nil {
				t.Fatal(err)
			}
			out[name] = string(data)
		}
		return out
	}
	want := read()
	parts := e.Partitions()

	if rep := e.Restart(); len(rep.RewrittenSpecs) != 0 {
		t.Fatalf("a restart over intact specs rewrote %v", rep.RewrittenSpecs)
	}

	// A reboot: the directory itself is gone.
	if err := os.RemoveAll(filepath.Join(e.Dir, "cdi")); err != nil {
		t.Fatal(err)
	}
	rep := e.Restart()
	slices.Sort(rep.RewrittenSpecs)
	if !slices.Equal(rep.RewrittenSpecs, []types.UID{"uid-a", "uid-b"}) {
		t.Fatalf("rewritten after the directory was emptied: %v, want both claims", rep.RewrittenSpecs)
	}
	if got := read(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("specs after a reboot:\n%v\nwant\n%v", got, want)
	}

	// A damaged file: still there, but no longer the claim's spec.
	path := filepath.Join(e.Dir, "cdi", specs[0])
	if err := os.WriteFile(path, []byte(want[specs[0]][:40]), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := e.Restart(); len(rep.RewrittenSpecs) != 1 {
		t.Fatalf("rewritten after a spec was damaged: %v, want one", rep.RewrittenSpecs)
	}
	if got := read(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("specs after the damaged one was rewritten:\n%v\nwant\n%v", got, want)
	}

	// The kubelet's prepare of a prepared claim, the driver running.
	for _, name := range specs {
		if err := os.Remove(filepath.Join(e.Dir, "cdi", name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*resourcev1.ResourceClaim{a, b} {
		if _, err := e.Kit.Prepare(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("specs after prepares of prepared claims:\n%v\nwant\n%v", got, want)
	}
	if got := e.Partitions(); !slices.Equal(got, parts) {
		t.Fatalf("partitions %v, were %v: nothing but specs may be made again", got, parts)
	}
}

// TestPrepareChecksDeviceNodes: a device node the CDI spec would name by
// host path that is not on the host fails the prepare with the node's
// path, before the claim is reported prepared (the runtime would fail the
// container's creation instead, after the fact), and leaves nothing
// behind; once the node is back, the prepare succeeds.
func TestPrepareChecksDeviceNodes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	node := filepath.Join(e.GPUs.DevDir(), "nvidia1")
	if err := os.Remove(node); err != nil {
		t.Fatal(err)
	}
	c := claim("a", migDev(1, "2g.10gb", 2))
	_, err := e.Kit.Prepare(ctx, c)
	if want := "device node /dev/nvidia1 is not on this host (" + node + ")"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("prepare: %v, want %q", err, want)
	}
	if len(e.Partitions())+len(e.Specs()) != 0 {
		t.Fatalf("left by the failed prepare: partitions %v, specs %v", e.Partitions(), e.Specs())
	}
	if err := e.GPUs.CreateDeviceNodes(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kit.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// TestFailpointsInOrder pins the steps the crash tests kill at.
func TestFailpointsInOrder(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := claim("a", migDev(0, "1g.5gb", 0))
	if _, err := e.Kit.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if hits := e.Hits(); !slices.Equal(hits, prepare.PrepareFailpoints) {
		t.Fatalf("prepare steps %v, want %v", hits, prepare.PrepareFailpoints)
	}
	if err := e.Kit.Unprepare(ctx, c.UID); err != nil {
		t.Fatal(err)
	}
	if hits := e.Hits(); !slices.Equal(hits, prepare.UnprepareFailpoints) {
		t.Fatalf("unprepare steps %v, want %v", hits, prepare.UnprepareFailpoints)
	}
}

// TestConfigReachesTheProfile: the mock backend gets a claim's GpuConfig
// (its time-slice in the container's environment) and refuses what it
// cannot simulate before creating anything.
func TestConfigReachesTheProfile(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	withConfig := func(name, params string) *resourcev1.ResourceClaim {
		c := claim(name, migDev(0, "1g.5gb", 0))
		c.Status.Allocation.Devices.Config = []resourcev1.DeviceAllocationConfiguration{{
			Source: resourcev1.AllocationConfigSourceClaim,
			DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
				Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"gpu.dractl.dev/v1alpha1","kind":"GpuConfig",` + params + `}`)},
			}},
		}}
		return c
	}
	if _, err := e.Kit.Prepare(ctx, withConfig("ci", `"computeInstanceProfile":"1c"`)); err == nil || !strings.Contains(err.Error(), "the mock backend simulates GPU instances only") {
		t.Fatalf("computeInstanceProfile on the mock: %v", err)
	}
	if got := e.Partitions(); len(got) != 0 {
		t.Fatalf("partitions after a refused prepare: %v", got)
	}
	got, err := e.Kit.Prepare(ctx, withConfig("ts", `"timeSlicing":{"interval":"Medium"}`))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(filepath.Join(e.Dir, "cdi")), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, got[0].CDIDeviceIDs...); err != nil {
		t.Fatal(err)
	}
	if want := gpu.EnvPrefix(migDev(0, "1g.5gb", 0)) + "TIMESLICE_INTERVAL=Medium"; !slices.Contains(spec.Process.Env, want) {
		t.Fatalf("container env lacks %s: %v", want, spec.Process.Env)
	}
}
