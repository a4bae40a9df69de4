package allocator

import (
	"errors"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
)

// A quantity like 1e100000000 parses, but comparing or adding it to an
// ordinary quantity materializes 10^100000000: upstream's allocator runs
// for minutes. These calls must end at once with a clear verdict.
func TestHugeQuantitiesAreBounded(t *testing.T) {
	const huge = "1e100000000"
	t.Run("counter set", func(t *testing.T) {
		slices := []*api.ResourceSlice{
			at.Slice("a").Node("node-1").Pool("p").Count(2).Counters("gpu", "mem", huge).Obj(),
			at.Slice("b").Node("node-1").Pool("p").Count(2).Device(at.Device("d").Consumes("gpu", "mem", "1Gi")).Obj(),
		}
		e := &env{slices: slices, classes: []*resourcev1.DeviceClass{anyClass}}
		_, err := e.run(t, node1, at.Claim("c").Request(at.Request("r", "any")).Obj())
		var u *UnfitError
		if !errors.As(err, &u) || len(u.Explanation.InvalidPools) != 1 ||
			!strings.Contains(u.Explanation.InvalidPools[0].Error(), "spec.sharedCounters[0].counters[mem].value") {
			t.Fatalf("want unfit with pool p invalid at the counter, got %v", err)
		}
	})
	t.Run("consumed counter", func(t *testing.T) {
		slices := []*api.ResourceSlice{
			at.Slice("a").Node("node-1").Pool("p").Count(2).Counters("gpu", "mem", "80Gi").Obj(),
			at.Slice("b").Node("node-1").Pool("p").Count(2).Device(at.Device("d").Consumes("gpu", "mem", huge)).Obj(),
		}
		e := &env{slices: slices, classes: []*resourcev1.DeviceClass{anyClass}}
		_, err := e.run(t, node1, at.Claim("c").Request(at.Request("r", "any")).Obj())
		var u *UnfitError
		if !errors.As(err, &u) || len(u.Explanation.InvalidPools) != 1 ||
			!strings.Contains(u.Explanation.InvalidPools[0].Error(), "consumesCounters[0].counters[mem].value") {
			t.Fatalf("want unfit with pool p invalid at the consumption, got %v", err)
		}
	})
	t.Run("capacity", func(t *testing.T) {
		e := &env{slices: simple(at.Device("d").Capacity("mem", huge)), classes: []*resourcev1.DeviceClass{anyClass}}
		_, err := e.run(t, node1, at.Claim("c").Request(at.Request("r", "any").Selector(`device.capacity["driver.example.com"].mem.compareTo(quantity("1Gi")) > 0`)).Obj())
		if !IsUnfit(err) {
			t.Fatalf("want unfit (invalid pool), got %v", err)
		}
	})
	t.Run("CEL literal", func(t *testing.T) {
		e := &env{slices: simple(at.Device("d").Capacity("mem", "80Gi")), classes: []*resourcev1.DeviceClass{anyClass}}
		_, err := e.run(t, node1, at.Claim("c").Request(at.Request("r", "any").Selector(`device.capacity["driver.example.com"].mem.compareTo(quantity("`+huge+`")) < 0`)).Obj())
		if !strings.Contains(fmtErr(err), "magnitude must be zero or between") {
			t.Fatalf("want a fatal CEL error about the quantity's magnitude, got %v", err)
		}
	})
	t.Run("capacity request", func(t *testing.T) {
		policy := &resourcev1.CapacityRequestPolicy{ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qty("1"), Step: qty("1")}}
		e := &env{slices: simple(at.Device("d").Multi().CapacityPolicy("bw", "100", policy)), classes: []*resourcev1.DeviceClass{anyClass}}
		_, err := e.run(t, node1, at.Claim("c").Request(at.Request("r", "any").Capacity("bw", huge)).Obj())
		if !strings.Contains(fmtErr(err), "cannot be represented") {
			t.Fatalf("want a fatal 'cannot be represented', got %v", err)
		}
	})
}

// Counters are exact up to 2^64-1 in whole units: here 10^19 less an
// allocated 9*10^18 leaves room for a device consuming 1. Beyond 2^64-1
// the pool is invalid.
func TestLargeCounters(t *testing.T) {
	pool := func(value string) []*api.ResourceSlice {
		return []*api.ResourceSlice{
			at.Slice("a").Node("node-1").Pool("p").Count(2).Counters("set", "c", value).Obj(),
			at.Slice("b").Node("node-1").Pool("p").Count(2).Device(
				at.Device("big").Consumes("set", "c", "9000000000000000000"),
				at.Device("one").Consumes("set", "c", "1")).Obj(),
		}
	}
	held := at.Claim("h").Request(at.Request("r", "any")).Allocated(at.Result("r", "driver.example.com", "p", "big")).Obj()
	e := &env{slices: pool("10000000000000000000"), classes: []*resourcev1.DeviceClass{anyClass}, allocated: []*resourcev1.ResourceClaim{held}}
	res, err := e.run(t, node1, at.Claim("c").Request(at.Request("r", "any")).Obj())
	if err != nil || devices(res[0])[0] != "r=p/one" {
		t.Fatalf("want r=p/one, got %v %v", res, err)
	}
	e = &env{slices: pool("20000000000000000000"), classes: []*resourcev1.DeviceClass{anyClass}}
	_, err = e.run(t, node1, at.Claim("c").Request(at.Request("r", "any")).Obj())
	var u *UnfitError
	if !errors.As(err, &u) || len(u.Explanation.InvalidPools) != 1 || !strings.Contains(err.Error(), "2^64-1") {
		t.Fatalf("want pool p invalid for a counter beyond 2^64-1, got %v", err)
	}
}
