package drivertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/validation"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/prepare"
	"github.com/dractl/dractl/pkg/driver/publish"
)

// NewKit is a node's prepare kit as its driver brings it up: made with
// cfg, told what node publishes of pool, and reconciled with what the
// Profile and the state directory hold, as at every start.
func NewKit(tb testing.TB, cfg prepare.Config, node string, pool []*api.ResourceSlice) (*prepare.Kit, *prepare.ReconcileReport) {
	tb.Helper()
	kit, err := prepare.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	published, err := publish.Build(cfg.DriverName, node, pool)
	if err != nil {
		tb.Fatal(err)
	}
	kit.SetInventory(prepare.InventoryOf(published.Resources))
	rep, err := kit.Reconcile(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return kit, rep
}

// Claim is a claim allocated the given devices of driver on node, one
// request each (r0, r1, ...).
func Claim(driver, node, name string, devices ...string) *resourcev1.ResourceClaim {
	var rs []resourcev1.DeviceRequestAllocationResult
	for i, d := range devices {
		rs = append(rs, at.Result(fmt.Sprintf("r%d", i), driver, node, d))
	}
	return at.Claim(name).Allocated(rs...).Obj()
}

// BenchPrepareUnprepare prepares and unprepares one claim per iteration,
// of each of driver's devices on node in turn, and reports the p50 and
// p99 of a pair.
func BenchPrepareUnprepare(b *testing.B, kit *prepare.Kit, driver, node string, devices []string) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		c := Claim(driver, node, fmt.Sprintf("c%d", i), devices[i%len(devices)])
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
}

// MockNode is a node of the mock GPU backend: two A100s simulated under
// Dir, a kit with its checkpoints and CDI directory next to them.
type MockNode struct {
	t testing.TB
	// Dir holds the GPUs' state (gpus), the checkpoints and the CDI
	// specs (cdi).
	Dir  string
	GPUs *gpu.GPUs
	Kit  *prepare.Kit

	// hitsMu guards hits, appended to by the kit's failpoint hook from
	// concurrent prepares.
	hitsMu sync.Mutex
	hits   []prepare.Failpoint
}

// NewMockNode makes a node and brings its kit up (Restart).
func NewMockNode(t testing.TB) *MockNode {
	t.Helper()
	n := &MockNode{t: t, Dir: t.TempDir()}
	n.Restart()
	return n
}

// Restart builds a new kit over the same directories, as a new driver
// process would, and reconciles.
func (n *MockNode) Restart() *prepare.ReconcileReport {
	n.t.Helper()
	gpus, err := gpu.New(gpu.DriverName, MockNodeName, "a100", 2, filepath.Join(n.Dir, "gpus"))
	if err != nil {
		n.t.Fatal(err)
	}
	// A runtime's injection reads the device nodes from the host.
	if err := gpus.CreateDeviceNodes(); err != nil {
		n.t.Fatal(err)
	}
	kit, rep := NewKit(n.t, prepare.Config{
		DriverName: gpu.DriverName, Profile: gpus, StateDir: n.Dir, CDIDir: filepath.Join(n.Dir, "cdi"), CDIClass: "gpu",
		Failpoint: func(f prepare.Failpoint) {
			n.hitsMu.Lock()
			n.hits = append(n.hits, f)
			n.hitsMu.Unlock()
		},
	}, MockNodeName, gpus.Pool())
	n.GPUs, n.Kit = gpus, kit
	return rep
}

// MockNodeName is the name of a MockNode's node.
const MockNodeName = "node-1"

// Hits returns the failpoints the kit has reached since the last call,
// in order, and forgets them.
func (n *MockNode) Hits() []prepare.Failpoint {
	n.hitsMu.Lock()
	defer n.hitsMu.Unlock()
	out := n.hits
	n.hits = nil
	return out
}

// Partitions lists the MIG devices that exist, as "device@claim".
func (n *MockNode) Partitions() []string {
	n.t.Helper()
	ps, err := n.GPUs.Partitions(context.Background())
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.Device+"@"+string(p.Claim))
	}
	slices.Sort(out)
	return out
}

// Specs lists the files of the CDI directory.
func (n *MockNode) Specs() []string {
	n.t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.Dir, "cdi"))
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, x := range entries {
		out = append(out, x.Name())
	}
	return out
}

// FakeServer is the kube-apiserver of tests on a fake clientset, which
// serves no discovery and stores every field: known by its version only.
var FakeServer = &publish.Server{Version: "v1.37.2", Minor: validation.KubeVersion{Minor: 37}, Rules: validation.KubeVersion{Minor: 37}}

// EqualJSON reports whether a and b encode to the same JSON.
func EqualJSON(t testing.TB, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}
