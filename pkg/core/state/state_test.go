package state_test

import (
	"context"
	"errors"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/pkg/core/allocator"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
)

const driver = "gpu.example.com"

// partitioned is KEP-4815's GPU: one 40Gi counter set, a whole device and
// four 10Gi partitions consuming it.
func partitioned(st *state.State, t *testing.T) {
	t.Helper()
	at.Must(t, st.SetMixinSlice(at.Slice("counters").Driver(driver).Pool("node-1").Node("node-1").Count(2).
		Counters("gpu-0", "memory", "40Gi").Obj()))
	devs := []*at.DeviceBuilder{at.Device("gpu-0").Consumes("gpu-0", "memory", "40Gi")}
	for i := range 4 {
		devs = append(devs, at.Device(at.Name("part", i)).Consumes("gpu-0", "memory", "10Gi"))
	}
	at.Must(t, st.SetMixinSlice(at.Slice("devices").Driver(driver).Pool("node-1").Node("node-1").Count(2).Device(devs...).Obj()))
	at.Must(t, st.SetClass(at.Class("gpu", `device.driver == "`+driver+`"`)))
}

func allocated(name string, devices ...string) *resourcev1.ResourceClaim {
	var rs []resourcev1.DeviceRequestAllocationResult
	for _, d := range devices {
		rs = append(rs, at.Result("gpu", driver, "node-1", d))
	}
	return at.Claim(name).Request(at.Request("gpu", "gpu")).Allocated(rs...).Obj()
}

func pending(name string) *resourcev1.ResourceClaim {
	return at.Claim(name).Request(at.Request("gpu", "gpu")).Obj()
}

func TestCycleAllocatesAroundHeldDevices(t *testing.T) {
	st := state.New(state.Options{})
	partitioned(st, t)
	at.Must(t, st.SetClaim(allocated("a", "part-0")))
	claim := pending("b")
	at.Must(t, st.SetClaim(claim))
	snap := st.Snapshot()
	res, err := snap.Cycle([]*resourcev1.ResourceClaim{claim}, state.CycleOptions{}).Allocate(context.Background(), at.Node("node-1"))
	at.Must(t, err)
	if got := res[0].Devices.Results[0].Device; got != "part-1" {
		t.Fatalf("allocated %s, want part-1 (gpu-0 is blocked by part-0, part-0 is held)", got)
	}
	u := snap.Usage(pool.ID{Driver: driver, Pool: "node-1"})
	if got := u.CounterSets[0].Counters[0].Consumed; got.Cmp(resource.MustParse("10Gi")) != 0 {
		t.Errorf("consumed %s, want 10Gi", got.String())
	}
	var blocked, held []string
	for _, d := range u.Devices {
		if d.Blocked {
			blocked = append(blocked, d.Device.Name)
		}
		if len(d.Holders) > 0 {
			held = append(held, d.Device.Name)
		}
	}
	if len(blocked) != 1 || blocked[0] != "gpu-0" || len(held) != 1 || held[0] != "part-0" {
		t.Errorf("blocked %v held %v, want [gpu-0] and [part-0]", blocked, held)
	}
}

func TestSnapshotIsImmutable(t *testing.T) {
	st := state.New(state.Options{})
	partitioned(st, t)
	before := st.Snapshot()
	if st.Snapshot() != before {
		t.Fatal("a snapshot without deltas in between should be reused")
	}
	at.Must(t, st.SetClaim(allocated("a", "gpu-0")))
	after := st.Snapshot()
	if after == before || after.Version() <= before.Version() {
		t.Fatal("a delta must produce a new snapshot with a higher version")
	}
	id := pool.ID{Driver: driver, Pool: "node-1"}
	if n := len(before.Claims()); n != 0 {
		t.Errorf("old snapshot sees %d claims, want 0", n)
	}
	if !after.Usage(id).Devices[0].InUse() || before.Usage(id).Devices[0].InUse() {
		t.Error("only the new snapshot may see gpu-0 in use")
	}
}

func TestAssumeAndForget(t *testing.T) {
	st := state.New(state.Options{})
	partitioned(st, t)
	claim := pending("b")
	at.Must(t, st.SetClaim(claim))
	withAlloc := allocated("b", "part-2")
	at.Must(t, st.Assume(withAlloc))
	snap := st.Snapshot()
	if !snap.Assumed(state.KeyOf(claim)) {
		t.Fatal("claim b should be assumed")
	}
	// The informer still reports b without allocation: the assumption stands.
	at.Must(t, st.SetClaim(claim))
	if c, _ := st.Snapshot().Claim(state.KeyOf(claim)); c.Status.Allocation == nil {
		t.Fatal("observing b unallocated dropped the assumption")
	}
	// A second claim cannot take part-2 while it is assumed for b.
	at.Must(t, st.SetClaim(pending("c")))
	var conflict *state.ConflictError
	if err := st.Assume(allocated("c", "part-2")); !errors.As(err, &conflict) || !conflict.HolderAssumed {
		t.Fatalf("assume c on part-2: got %v, want a conflict with b's assumed allocation", err)
	}
	at.Must(t, st.Forget("default", "b"))
	at.Must(t, st.Assume(allocated("c", "part-2")))
	// The API catches up with c: the observed allocation replaces the assumed one.
	at.Must(t, st.SetClaim(allocated("c", "part-2")))
	if st.Snapshot().Assumed(state.ClaimKey{Namespace: "default", Name: "c"}) {
		t.Error("c is still assumed after the API reported its allocation")
	}
}

// TestCreated: an allocation assumed for a claim the caller creates
// afterwards carries over to the created claim, holding its devices all
// along.
func TestCreated(t *testing.T) {
	st := state.New(state.Options{})
	partitioned(st, t)
	key := state.ClaimKey{Namespace: "default", Name: "b"}
	placeholder := pending("b")
	placeholder.UID = "placeholder"
	at.Must(t, st.SetClaim(placeholder))
	at.Must(t, st.AssumeBy(allocated("b", "part-2"), "self"))
	at.Must(t, st.SetWritten("default", "b", "3"))
	created := pending("b")
	created.UID, created.ResourceVersion = "real", "4"
	if err := st.Created(allocated("b", "part-2")); err == nil {
		t.Error("Created took a claim with an allocation")
	}
	if err := st.Created(pending("c")); err == nil {
		t.Error("Created took a claim without an assumption")
	}
	at.Must(t, st.Created(created))
	a, ok := st.Assumption(key)
	if !ok || a.Claim.UID != "real" || a.Claim.Status.Allocation == nil || a.Owner != "self" || a.Written != "3" {
		t.Fatalf("assumption after Created: %+v (%v), want the created claim with the allocation, owner and write", a, ok)
	}
	if st.Observed(key) != created {
		t.Errorf("observed %v, want the created claim", st.Observed(key))
	}
	at.Must(t, st.SetClaim(pending("c")))
	var conflict *state.ConflictError
	if err := st.Assume(allocated("c", "part-2")); !errors.As(err, &conflict) || conflict.Holder != key {
		t.Fatalf("assume c on part-2: got %v, want a conflict with b", err)
	}
}

// TestAssumptionRecords: what is recorded of an assumption lives and dies
// with the assumed allocation, and recording it is no delta (snapshots
// answer the same).
func TestAssumptionRecords(t *testing.T) {
	st := state.New(state.Options{})
	partitioned(st, t)
	key := state.ClaimKey{Namespace: "default", Name: "b"}
	b := pending("b")
	b.ResourceVersion = "5"
	at.Must(t, st.SetClaim(b))
	at.Must(t, st.AssumeBy(allocated("b", "part-2"), "self"))
	snap := st.Snapshot()
	at.Must(t, st.SetMaybeWritten("default", "b", "5", time.Unix(60, 0)))
	if st.Snapshot() != snap {
		t.Error("recording a write made a new snapshot")
	}
	want := func(written string, holdUntil time.Time) {
		t.Helper()
		a, ok := st.Assumption(key)
		if !ok || a.Owner != "self" || a.Written != written || !a.HoldUntil.Equal(holdUntil) || a.Claim.Status.Allocation == nil {
			t.Fatalf("assumption of b: %+v (%v), want owner self, written %q, held until %v", a, ok, written, holdUntil)
		}
	}
	want("5", time.Unix(60, 0))
	if got := st.OnHold(); len(got) != 1 || got[0] != key {
		t.Errorf("on hold: %v, want [%v]", got, key)
	}
	// Observed again without the allocation: the assumption stands, with
	// what is known of it; the observed claim is the new one.
	b6 := b.DeepCopy()
	b6.ResourceVersion = "6"
	at.Must(t, st.SetClaim(b6))
	want("5", time.Unix(60, 0))
	if st.Observed(key) != b6 {
		t.Errorf("observed b: %v, want version 6", st.Observed(key))
	}
	at.Must(t, st.SetWritten("default", "b", "7"))
	want("7", time.Unix(60, 0))
	at.Must(t, st.Forget("default", "b"))
	if a, ok := st.Assumption(key); ok {
		t.Errorf("forgotten assumption still known: %+v", a)
	}
	if got, held := st.AssumedBy("self"), st.OnHold(); len(got) != 0 || len(held) != 0 {
		t.Errorf("after Forget: assumed by self %v, on hold %v, want none", got, held)
	}
	// An observed allocation and a deletion end assumptions as Forget does.
	at.Must(t, st.AssumeBy(allocated("b", "part-2"), "other"))
	at.Must(t, st.SetClaim(allocated("b", "part-2")))
	if got := st.AssumedBy("other"); len(got) != 0 {
		t.Errorf("assumed by other after the API showed the allocation: %v", got)
	}
	at.Must(t, st.SetClaim(pending("c")))
	at.Must(t, st.AssumeBy(allocated("c", "part-3"), "other"))
	if got := st.AssumedBy("other"); len(got) != 1 || got[0].Name != "c" {
		t.Errorf("assumed by other: %v, want [default/c]", got)
	}
	at.Must(t, st.DeleteClaim("default", "c"))
	if got := st.AssumedBy("other"); len(got) != 0 || st.Observed(state.ClaimKey{Namespace: "default", Name: "c"}) != nil {
		t.Errorf("deleted claim c still known: assumed by other %v", got)
	}
}

func TestBadDeltasChangeNothing(t *testing.T) {
	st := state.New(state.Options{})
	partitioned(st, t)
	at.Must(t, st.SetClaim(allocated("a", "part-0")))
	at.Must(t, st.SetClaim(pending("c")))
	at.Must(t, st.Assume(allocated("c", "part-2")))
	before := st.Snapshot()
	var nf *state.NotFoundError
	var conflict *state.ConflictError
	for name, err := range map[string]error{
		"delete unknown slice":         st.DeleteSlice("nope"),
		"delete unknown class":         st.DeleteClass("nope"),
		"delete unknown claim":         st.DeleteClaim("default", "nope"),
		"forget without assumption":    st.Forget("default", "a"),
		"assume unobserved claim":      st.Assume(allocated("x", "part-3")),
		"claim allocated twice":        st.SetClaim(allocated("b", "part-0")),
		"assume an allocated claim":    st.Assume(allocated("a", "part-1")),
		"assume without an allocation": st.Assume(pending("a")),
		"observed over an assumption":  st.SetClaim(allocated("d", "part-2")),
		"assume twice":                 st.Assume(allocated("c", "part-3")),
		"written without assumption":   st.SetWritten("default", "a", "7"),
		"held without assumption":      st.SetMaybeWritten("default", "a", "7", time.Unix(60, 0)),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		switch name {
		case "claim allocated twice":
			if !errors.As(err, &conflict) || conflict.Holder.Name != "a" || conflict.HolderAssumed {
				t.Errorf("%s: got %v, want a conflict naming claim a", name, err)
			}
		case "observed over an assumption":
			if !errors.As(err, &conflict) || conflict.Holder.Name != "c" || !conflict.HolderAssumed {
				t.Errorf("%s: got %v, want a conflict with claim c's assumed allocation", name, err)
			}
		case "delete unknown slice", "delete unknown class", "delete unknown claim", "forget without assumption", "assume unobserved claim",
			"written without assumption", "held without assumption":
			if !errors.As(err, &nf) {
				t.Errorf("%s: got %v, want NotFoundError", name, err)
			}
		}
	}
	if st.Snapshot() != before {
		t.Error("failed deltas changed the state")
	}
}

func TestUnfitExplains(t *testing.T) {
	st := state.New(state.Options{})
	partitioned(st, t)
	at.Must(t, st.SetClaim(allocated("a", "gpu-0")))
	claim := pending("b")
	_, err := st.Snapshot().Cycle([]*resourcev1.ResourceClaim{claim}, state.CycleOptions{Strategy: allocator.BestFit}).
		Allocate(context.Background(), at.Node("node-1"))
	var unfit *allocator.UnfitError
	if !errors.As(err, &unfit) {
		t.Fatalf("got %v, want UnfitError", err)
	}
	if n := unfit.Explanation.Claims[0].Requests[0].Rejected[allocator.ReasonCounterExhausted]; n != 4 {
		t.Errorf("%d partitions rejected for exhausted counters, want 4", n)
	}
}

func TestPoolCondition(t *testing.T) {
	id := pool.ID{Driver: driver, Pool: "node-1"}
	for _, tc := range []struct {
		name  string
		setup func(*state.State)
		want  state.Condition
		why   string
		inUse int
	}{{
		name:  "complete and valid",
		setup: func(st *state.State) { partitioned(st, t); at.Must(t, st.SetClaim(allocated("a", "part-0", "part-1"))) },
		want:  state.PoolOK,
		inUse: 2,
	}, {
		name: "one slice of two",
		setup: func(st *state.State) {
			at.Must(t, st.SetMixinSlice(at.Slice("counters").Driver(driver).Pool("node-1").Node("node-1").Count(2).
				Counters("gpu-0", "memory", "40Gi").Obj()))
		},
		want: state.PoolIncomplete,
		why:  "1 of 2 slices of generation 1",
	}, {
		name: "consumes a counter set nobody publishes",
		setup: func(st *state.State) {
			at.Must(t, st.SetMixinSlice(at.Slice("devices").Driver(driver).Pool("node-1").Node("node-1").Count(1).
				Device(at.Device("part-0").Consumes("gpu-9", "memory", "10Gi")).Obj()))
		},
		want: state.PoolInvalid,
		why:  `ResourceSlice devices: spec.devices[0].consumesCounters[0].counterSet: Not found: "gpu-9"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st := state.New(state.Options{})
			tc.setup(st)
			u := st.Snapshot().Usage(id)
			got, why := u.Condition()
			if got != tc.want || why != tc.why {
				t.Errorf("condition %q %q, want %q %q", got, why, tc.want, tc.why)
			}
			if n := u.Allocated(); n != tc.inUse {
				t.Errorf("%d devices in use, want %d", n, tc.inUse)
			}
		})
	}
}

// The State hands its feature gates to every allocator it builds: with
// DRAPartitionableDevices off, no partition (all consume counters) can be
// allocated.
func TestFeatureGatesReachTheAllocator(t *testing.T) {
	for _, tc := range []struct {
		gates features.Set
		fit   bool
	}{
		{features.All(), true},
		{features.All().With(features.PartitionableDevices, false).With(features.DeviceCompatibilityGroups, false), false},
	} {
		st := state.New(state.Options{Features: tc.gates})
		partitioned(st, t)
		claim := pending("b")
		at.Must(t, st.SetClaim(claim))
		_, err := st.Snapshot().Cycle([]*resourcev1.ResourceClaim{claim}, state.CycleOptions{}).Allocate(context.Background(), at.Node("node-1"))
		if fit := err == nil; fit != tc.fit || (!fit && !allocator.IsUnfit(err)) {
			t.Errorf("gates %s: err %v, want fit=%v", tc.gates, err, tc.fit)
		}
	}
}

func TestNodePools(t *testing.T) {
	st := state.New(state.Options{})
	partitioned(st, t)
	at.Must(t, st.SetMixinSlice(at.Slice("other").Driver(driver).Pool("node-2").Node("node-2").Device(at.Device("gpu-9")).Obj()))
	for node, want := range map[string]string{"node-1": driver + "/node-1", "node-2": driver + "/node-2", "node-3": ""} {
		ids, err := st.Snapshot().NodePools(at.Node(node))
		at.Must(t, err)
		got := ""
		for _, id := range ids {
			got += id.String()
		}
		if got != want {
			t.Errorf("%s sees %q, want %q", node, got, want)
		}
	}
}
