package allocator

import (
	"errors"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/pool"
)

// An invalid pool fails the node, not the pod: upstream returns
// ErrFailedAllocationOnNode, so other nodes are still tried. The
// explanation must carry the pool with every problem so that a caller can
// say why when no node fits.
func TestInvalidPoolIsUnfitWithReasons(t *testing.T) {
	dupA := at.Slice("d1").Node("node-1").Pool("a").Count(2).Device(at.Device("x")).Obj()
	dupB := at.Slice("d2").Node("node-1").Pool("a").Count(2).Device(at.Device("x"), at.Device("y").Consumes("nope", "c", "1")).Obj()
	other := at.Slice("o").Node("node-1").Pool("b").Device(at.Device("z")).Obj()
	e := &env{slices: []*api.ResourceSlice{dupA, dupB, other}, classes: []*resourcev1.DeviceClass{anyClass}}
	_, err := e.run(t, node1, at.Claim("c").Request(at.Request("r", "any").Count(2)).Obj())
	var u *UnfitError
	if !errors.As(err, &u) {
		t.Fatalf("want *UnfitError, got %T %v", err, err)
	}
	ips := u.Explanation.InvalidPools
	if len(ips) != 1 || ips[0].Pool != (pool.ID{Driver: "driver.example.com", Pool: "a"}) {
		t.Fatalf("InvalidPools = %v, want pool driver.example.com/a", ips)
	}
	if n := len(ips[0].Problems); n != 2 {
		t.Errorf("want both problems (duplicate name, unknown counter set), got %d: %v", n, ips[0])
	}
	for _, want := range []string{"driver.example.com/a is invalid", "nope"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if got := u.Explanation.Claims[0].Requests[0].Rejected[ReasonInvalidPool]; got != 3 {
		t.Errorf("ReasonInvalidPool = %d, want the 3 devices of the invalid pool", got)
	}

	// A node that does not see the invalid pool has nothing to report.
	_, err = e.run(t, at.Node("node-2"), at.Claim("c").Request(at.Request("r", "any")).Obj())
	if !errors.As(err, &u) || len(u.Explanation.InvalidPools) != 0 {
		t.Fatalf("node-2: want unfit without invalid pools, got %v", err)
	}
}

// A constraint that excludes a device an "All" request must take is a
// mistake in the claim, which upstream reports as fatal. Pruning on a later
// request of the same claim must not hide it (seed1-415).
func TestAllWithConstraintViolationIsFatalDespiteLaterRequest(t *testing.T) {
	gpu := at.Slice("g").Node("node-1").Pool("g").Device(at.Device("m0").Str("parent", "p0")).Obj()
	nic := at.Slice("n").Node("node-1").Pool("n").Device(at.Device("nic0")).Obj() // no "parent"
	e := &env{slices: []*api.ResourceSlice{gpu, nic}, classes: []*resourcev1.DeviceClass{anyClass,
		at.Class("nic", `device.attributes["driver.example.com"].?parent.orValue("") == ""`)}}
	c := at.Claim("c").
		Request(at.Request("a", "any").Selector(`device.attributes["driver.example.com"].?parent.orValue("") == "p0"`)).
		Request(at.Request("b", "nic").All()).
		Request(at.Request("z", "any")). // can never be satisfied: nothing left
		DistinctAttribute("driver.example.com/parent").Obj()
	_, err := e.run(t, node1, c)
	var fe *FatalError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "constraint would not be satisfied") {
		t.Fatalf("want fatal constraint error, got %T %v", err, err)
	}
}
