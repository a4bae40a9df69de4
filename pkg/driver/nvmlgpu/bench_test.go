package nvmlgpu_test

import (
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu/nvmlmock"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// pooled is a Profile that describes its pool.
type pooled interface {
	prepare.Profile
	Pool() []*api.ResourceSlice
}

// backends build the profile of 8 H100s: simulated from pkg/driver/mig's table,
// or discovered through NVML on NVIDIA's DGX H100 mock. setup runs once
// (the mock NVML server stands for the machine); the function it returns
// builds the profile, as a starting driver does.
var backends = []struct {
	name  string
	setup func(b *testing.B, dir string) func() pooled
}{
	{"mock", func(b *testing.B, dir string) func() pooled {
		return func() pooled {
			g, err := gpu.New(driver, node, "h100", 8, filepath.Join(dir, "gpus"))
			if err != nil {
				b.Fatal(err)
			}
			return g
		}
	}},
	{"nvml", func(b *testing.B, dir string) func() pooled {
		srv, err := nvmlmock.New("dgxh100")
		if err != nil {
			b.Fatal(err)
		}
		minors := filepath.Join(dir, "mig-minors")
		if err := srv.WriteMigMinors(minors); err != nil {
			b.Fatal(err)
		}
		return func() pooled {
			g, err := nvmlgpu.New(srv, nvmlgpu.Options{Driver: driver, Node: node, StateDir: dir, MigMinors: minors}, logr.Discard())
			if err != nil {
				b.Fatal(err)
			}
			return g
		}
	}},
}

// BenchmarkPrepareUnprepare: one claim with one MIG device (a 1g.10gb,
// each of the 56 in turn) prepared and unprepared through the kit, with
// every checkpoint fsynced; p50 and p99 per pair, per backend.
func BenchmarkPrepareUnprepare(b *testing.B) {
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			dir := b.TempDir()
			g := be.setup(b, dir)()
			kit, _ := drivertest.NewKit(b, prepare.Config{DriverName: driver, Profile: g, StateDir: dir, CDIDir: filepath.Join(dir, "cdi")}, node, g.Pool())
			var devices []string
			for gpu := range 8 {
				for start := range 7 {
					devices = append(devices, mig.MIGDeviceName(gpu, "1g.10gb", start))
				}
			}
			drivertest.BenchPrepareUnprepare(b, kit, driver, node, devices)
		})
	}
}

// BenchmarkDiscoverPool8GPUs: from nothing to the pool of 8 H100s (the
// profile built and its slices described), per backend: pkg/driver/mig's table
// for the mock, NVML queries for nvml.
func BenchmarkDiscoverPool8GPUs(b *testing.B) {
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			start := be.setup(b, b.TempDir())
			b.ReportAllocs()
			for b.Loop() {
				if pool := start().Pool(); len(pool) < 2 {
					b.Fatal("no pool")
				}
			}
		})
	}
}
