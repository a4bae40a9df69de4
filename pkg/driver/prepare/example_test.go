package prepare_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
	"github.com/dractl/dractl/pkg/driver/publish"
)

// A driver's node side in four steps: publish the pool the hardware
// offers, reconcile what a previous run left, prepare the claims the
// scheduler allocated, unprepare them when their pods are gone. The
// Profile here is the simulated MIG GPU of pkg/driver/gpu; a real driver
// brings its own. The kubelet plugin (Start) wraps exactly these calls.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "driverkit-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	gpus, err := gpu.New(gpu.DriverName, "node-1", "a100", 1, filepath.Join(dir, "gpus"))
	if err != nil {
		panic(err)
	}
	// The simulated kernel driver's device nodes, which the CDI specs
	// name and a prepare checks for.
	if err := gpus.CreateDeviceNodes(); err != nil {
		panic(err)
	}
	kit, err := prepare.New(prepare.Config{
		DriverName: gpu.DriverName, Profile: gpus,
		StateDir: filepath.Join(dir, "state"), CDIDir: filepath.Join(dir, "cdi"),
	})
	if err != nil {
		panic(err)
	}
	// Build checks the pool as kube-apiserver and the scheduler would and
	// splits it into the slices to publish; the kit learns what it may
	// prepare from it.
	published, err := publish.Build(gpu.DriverName, "node-1", gpus.Pool())
	if err != nil {
		panic(err)
	}
	kit.SetInventory(prepare.InventoryOf(published.Resources))
	if _, err := kit.Reconcile(ctx); err != nil {
		panic(err)
	}

	// A claim the scheduler allocated a 3g.20gb partition of GPU 0.
	small := mig.MIGDeviceName(0, "3g.20gb", 4)
	claim := at.Claim("inference").Allocated(at.Result("gpu", gpu.DriverName, "node-1", small)).Obj()
	devices, err := kit.Prepare(ctx, claim)
	if err != nil {
		panic(err)
	}
	fmt.Println("prepared", devices[0].DeviceName, "as", devices[0].CDIDeviceIDs)

	// The whole GPU overlaps it: a stale allocation is refused on the
	// node, the last line of defence behind the scheduler.
	whole := at.Claim("training").Allocated(at.Result("gpu", gpu.DriverName, "node-1", mig.MIGDeviceName(0, "7g.40gb", 0))).Obj()
	_, err = kit.Prepare(ctx, whole)
	var conflict *prepare.PrepareConflictError
	fmt.Println("whole GPU refused:", errors.As(err, &conflict))

	if err := kit.Unprepare(ctx, claim.UID); err != nil {
		panic(err)
	}
	_, err = kit.Prepare(ctx, whole)
	fmt.Println("whole GPU after unprepare:", err)
	// Output:
	// prepared gpu-0-mig-3g-20gb-4 as [gpu.dractl.dev/claim=uid-inference-gpu-0-mig-3g-20gb-4]
	// whole GPU refused: true
	// whole GPU after unprepare: <nil>
}
