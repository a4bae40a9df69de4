package driverkit_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// withConfig gives a claim's allocation one opaque configuration of the
// driver, as the claim's own.
func withConfig(c *resourcev1.ResourceClaim, params string) *resourcev1.ResourceClaim {
	c.Status.Allocation.Devices.Config = []resourcev1.DeviceAllocationConfiguration{{
		Source: resourcev1.AllocationConfigSourceClaim,
		DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: driver,
			Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"` + gpu.APIVersion + `","kind":"` + gpu.Kind + `",` + params + `}`)}}},
	}}
	return c
}

// blocking holds CreatePartition until released, to catch a request in
// flight.
type blocking struct {
	*gpu.GPUs
	entered, release chan struct{}
}

func (b blocking) CreatePartition(ctx context.Context, uid types.UID, dev prepare.AllocatedDevice) (prepare.Partition, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.GPUs.CreatePartition(ctx, uid, dev)
}

// TestDriverMetrics: every prepare and unprepare is timed; a failure is
// counted under its reason; a request is in flight while it is served;
// prepared claims and their partitions by MIG profile follow what is
// prepared; the slices' writes are timed.
func TestDriverMetrics(t *testing.T) {
	e := newEnv(t)
	a := claim("a", migDev(0, "1g.5gb", 0))
	overlap := claim("overlap", migDev(0, "1g.10gb", 0))
	pending := at.Claim("pending").Obj()
	badConfig := withConfig(claim("bad-config", migDev(1, "1g.5gb", 0)), `"bogus":1`)
	ciProfile := withConfig(claim("ci-profile", migDev(1, "1g.5gb", 1)), `"computeInstanceProfile":"1c"`)
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	generateNames(client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := driverkit.NewMetrics(driver)
	b := blocking{GPUs: e.GPUs, entered: make(chan struct{}), release: make(chan struct{})}
	d, _, _ := startDriver(ctx, t, e, client, func(o *driverkit.Options) {
		o.Metrics = m
		o.Profile = b
	})
	value := func(name string, labels ...string) float64 {
		t.Helper()
		l := map[string]string{"driver": driver}
		for i := 0; i < len(labels); i += 2 {
			l[labels[i]] = labels[i+1]
		}
		return metricValue(t, m.Registry(), name, l)
	}

	prepared := make(chan map[types.UID]kubeletplugin.PrepareResult)
	go func() {
		res, _ := d.PrepareResourceClaims(ctx, []*resourcev1.ResourceClaim{a})
		prepared <- res
	}()
	<-b.entered
	if got := value(driverkit.MetricRequestsInFlight, "operation", "prepare"); got != 1 {
		t.Errorf("prepares in flight while one is served: %v", got)
	}
	close(b.release)
	if res := <-prepared; res[a.UID].Err != nil {
		t.Fatal(res[a.UID].Err)
	}
	if got := value(driverkit.MetricRequestsInFlight, "operation", "prepare"); got != 0 {
		t.Errorf("prepares in flight after it: %v", got)
	}
	if got := value(driverkit.MetricPreparedClaims); got != 1 {
		t.Errorf("prepared claims %v, want 1", got)
	}
	if got := value(driverkit.MetricPartitions, "profile", "1g.5gb"); got != 1 {
		t.Errorf("1g.5gb partitions %v, want 1", got)
	}

	go func() {
		for range b.entered { // ci-profile reaches the mock, which refuses it
		}
	}()
	defer close(b.entered)
	res, _ := d.PrepareResourceClaims(ctx, []*resourcev1.ResourceClaim{overlap, pending, badConfig, ciProfile})
	for _, c := range []*resourcev1.ResourceClaim{overlap, pending, badConfig, ciProfile} {
		if res[c.UID].Err == nil {
			t.Errorf("claim %s prepared", c.Name)
		}
	}
	for reason, want := range map[string]float64{
		prepare.ReasonConflict: 1, prepare.ReasonNotAllocated: 1, prepare.ReasonConfig: 1, prepare.ReasonPartition: 1,
		prepare.ReasonCDI: 0, prepare.ReasonCheckpoint: 0, prepare.ReasonOther: 0,
	} {
		if got := value(driverkit.MetricOperationErrors, "operation", "prepare", "reason", reason); got != want {
			t.Errorf("prepare errors %s: %v, want %v", reason, got, want)
		}
	}
	if got := value(driverkit.MetricOperationDuration, "operation", "prepare"); got != 5 {
		t.Errorf("prepares timed: %v, want 5", got)
	}

	un, _ := d.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: a.UID}})
	if un[a.UID] != nil {
		t.Fatal(un[a.UID])
	}
	if got := value(driverkit.MetricOperationDuration, "operation", "unprepare"); got != 1 {
		t.Errorf("unprepares timed: %v, want 1", got)
	}
	if got := value(driverkit.MetricPreparedClaims); got != 0 {
		t.Errorf("prepared claims %v after unprepare, want 0", got)
	}
	// The slices were created through the metered client.
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return value(driverkit.MetricPublishDuration, "operation", "create") > 0, nil
	})
	if err != nil {
		t.Fatal("no slice creates timed")
	}
}
