package prepare_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
	"github.com/dractl/dractl/pkg/driver/publish"
)

// bigNode is a node of 16 H100s: 112 1g.10gb placements, so 100 claims
// get a MIG device each without overlapping.
func bigNode(tb testing.TB) (*prepare.Kit, []string) {
	dir := tb.TempDir()
	gpus, err := gpu.New(driver, node, "h100", 16, filepath.Join(dir, "gpus"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := gpus.CreateDeviceNodes(); err != nil {
		tb.Fatal(err)
	}
	kit, _ := drivertest.NewKit(tb, prepare.Config{DriverName: driver, Profile: gpus, StateDir: dir, CDIDir: filepath.Join(dir, "cdi")}, node, gpus.Pool())
	var devices []string
	for gpu := range 16 {
		for start := range 7 {
			devices = append(devices, mig.MIGDeviceName(gpu, "1g.10gb", start))
		}
	}
	return kit, devices
}

// prepareInParallel prepares one claim per device concurrently and
// returns the errors.
func prepareInParallel(kit *prepare.Kit, devices []string, round int) []error {
	errs := make([]error, len(devices))
	var wg sync.WaitGroup
	for i, d := range devices {
		wg.Go(func() {
			_, errs[i] = kit.Prepare(context.Background(), claim(fmt.Sprintf("p%d-%d", round, i), d))
		})
	}
	wg.Wait()
	return errs
}

// TestHundredParallelPrepares: 100 claims on distinct MIG devices prepared
// at once all succeed, each with its own partition and CDI spec.
func TestHundredParallelPrepares(t *testing.T) {
	kit, devices := bigNode(t)
	for i, err := range prepareInParallel(kit, devices[:100], 0) {
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	rep, err := kit.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Prepared) != 100 || len(rep.Destroyed)+len(rep.RemovedSpecs)+len(rep.RewrittenSpecs) != 0 {
		t.Fatalf("after 100 prepares: %d prepared, %d destroyed, %d specs removed, %d rewritten",
			len(rep.Prepared), len(rep.Destroyed), len(rep.RemovedSpecs), len(rep.RewrittenSpecs))
	}
}

// BenchmarkPrepareUnprepare: one claim with one MIG device, prepared and
// unprepared, with every checkpoint fsynced; p50 and p99 per pair.
func BenchmarkPrepareUnprepare(b *testing.B) {
	kit, devices := bigNode(b)
	drivertest.BenchPrepareUnprepare(b, kit, driver, node, devices)
}

// BenchmarkPrepare100Parallel: 100 claims prepared at once, then
// unprepared; any error fails the benchmark.
func BenchmarkPrepare100Parallel(b *testing.B) {
	kit, devices := bigNode(b)
	ctx := context.Background()
	b.ResetTimer()
	for round := range b.N {
		for i, err := range prepareInParallel(kit, devices[:100], round) {
			if err != nil {
				b.Fatalf("claim %d: %v", i, err)
			}
		}
		b.StopTimer()
		for i := range 100 {
			if err := kit.Unprepare(ctx, claim(fmt.Sprintf("p%d-%d", round, i)).UID); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
}

// BenchmarkBuild8x19: the pool of a DGX H100 node (8 GPUs × 19 devices
// and 8 counter sets) described with mixins, flattened, split and
// validated for publishing.
func BenchmarkBuild8x19(b *testing.B) {
	n := mig.Node{Driver: driver, Node: node, Model: &mig.H100, GPUs: 8, DriverVersion: "560.35.3", CUDADriverVersion: "12.6.0"}
	desc := n.Slices(mig.Mixins)
	b.ReportAllocs()
	for b.Loop() {
		p, err := publish.Build(driver, node, desc)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Slices) < 2 {
			b.Fatal("nothing built")
		}
	}
}
