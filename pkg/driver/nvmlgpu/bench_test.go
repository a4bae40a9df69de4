package nvmlgpu_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu/nvmlmock"
)

// pooled is a Profile that describes its pool.
type pooled interface {
	driverkit.Profile
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
			kit, err := driverkit.New(driverkit.Config{DriverName: driver, Profile: g, StateDir: dir, CDIDir: filepath.Join(dir, "cdi")})
			if err != nil {
				b.Fatal(err)
			}
			published, err := driverkit.Build(driver, node, g.Pool())
			if err != nil {
				b.Fatal(err)
			}
			kit.SetPublished(published)
			ctx := context.Background()
			if _, err := kit.Reconcile(ctx); err != nil {
				b.Fatal(err)
			}
			var devices []string
			for gpu := range 8 {
				for start := range 7 {
					devices = append(devices, mig.MIGDeviceName(gpu, "1g.10gb", start))
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				c := claim(fmt.Sprintf("c%d", i), devices[i%len(devices)])
				if _, err := kit.Prepare(ctx, c); err != nil {
					b.Fatal(err)
				}
				if err := kit.Unprepare(ctx, c.UID); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
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
