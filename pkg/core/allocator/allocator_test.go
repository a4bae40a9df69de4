package allocator

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/pool"
)

var node1 = at.Node("node-1", "zone", "a")

func simple(devs ...*at.DeviceBuilder) []*api.ResourceSlice {
	return []*api.ResourceSlice{at.Slice("s1").Node("node-1").Device(devs...).Obj()}
}

type tcase struct {
	name      string
	slices    []*api.ResourceSlice
	allocated []*resourcev1.ResourceClaim
	claims    []*resourcev1.ResourceClaim
	want      [][]string // per claim: request=pool/device
	unfit     bool
	fatal     string // substring of a FatalError
}

func runCases(t *testing.T, cases []tcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{slices: tc.slices, classes: []*resourcev1.DeviceClass{gpuClass, migClass, anyClass}, allocated: tc.allocated}
			res, err := e.run(t, node1, tc.claims...)
			switch {
			case tc.fatal != "":
				var fe *FatalError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.fatal) {
					t.Fatalf("want fatal %q, got %v", tc.fatal, err)
				}
				return
			case tc.unfit:
				if !IsUnfit(err) {
					t.Fatalf("want unfit, got %v %v", res, err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			for i := range tc.want {
				if got := devices(res[i]); !slices.Equal(got, tc.want[i]) {
					t.Errorf("claim %d: got %v want %v", i, got, tc.want[i])
				}
				verify(t, e, node1, tc.claims, res)
			}
		})
	}
}

func TestExactAndAll(t *testing.T) {
	three := simple(at.Device("d0"), at.Device("d1"), at.Device("d2"))
	runCases(t, []tcase{
		{name: "one", slices: three, claims: claims(at.Claim("c").Request(at.Request("r", "any"))), want: [][]string{{"r=pool/d0"}}},
		{name: "two", slices: three, claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(2))), want: [][]string{{"r=pool/d0", "r=pool/d1"}}},
		{name: "too many", slices: three, claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(4))), unfit: true},
		{name: "all", slices: three, claims: claims(at.Claim("c").Request(at.Request("r", "any").All())), want: [][]string{{"r=pool/d0", "r=pool/d1", "r=pool/d2"}}},
		{name: "all with one allocated", slices: three, allocated: claims(at.Claim("o").Allocated(at.Result("r", "driver.example.com", "pool", "d1"))),
			claims: claims(at.Claim("c").Request(at.Request("r", "any").All())), unfit: true},
		{name: "allocated skipped", slices: three, allocated: claims(at.Claim("o").Allocated(at.Result("r", "driver.example.com", "pool", "d0"))),
			claims: claims(at.Claim("c").Request(at.Request("r", "any"))), want: [][]string{{"r=pool/d1"}}},
		{name: "two claims share nothing", slices: three, claims: claims(at.Claim("a").Request(at.Request("r", "any")), at.Claim("b").Request(at.Request("r", "any").Count(2))),
			want: [][]string{{"r=pool/d0"}, {"r=pool/d1", "r=pool/d2"}}},
		{name: "selector", slices: simple(at.Device("d0").Str("color", "red"), at.Device("d1").Str("color", "blue")),
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Selector(`device.attributes["driver.example.com"].color == "blue"`))), want: [][]string{{"r=pool/d1"}}},
		{name: "unknown class", slices: three, claims: claims(at.Claim("c").Request(at.Request("r", "nope"))), fatal: "device class nope"},
		{name: "cel runtime error", slices: three, claims: claims(at.Claim("c").Request(at.Request("r", "any").Selector(`device.attributes["driver.example.com"].missing == "x"`))), fatal: "selector #0"},
		{name: "admin access uses allocated", slices: simple(at.Device("d0")), allocated: claims(at.Claim("o").Allocated(at.Result("r", "driver.example.com", "pool", "d0"))),
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Admin())), want: [][]string{{"r=pool/d0"}}},
		{name: "admin access not twice in one claim", slices: simple(at.Device("d0")),
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Admin().Count(2))), unfit: true},
	})
}

func claims(bs ...*at.ClaimBuilder) []*resourcev1.ResourceClaim {
	out := make([]*resourcev1.ResourceClaim, len(bs))
	for i, b := range bs {
		out[i] = b.Obj()
	}
	return out
}

func TestFirstAvailable(t *testing.T) {
	s := simple(at.Device("big").Str("size", "big"), at.Device("small-0").Str("size", "small"), at.Device("small-1").Str("size", "small"))
	big := at.Request("big", "any").Selector(`device.attributes["driver.example.com"].size == "big"`)
	small := at.Request("small", "any").Selector(`device.attributes["driver.example.com"].size == "small"`).Count(2)
	runCases(t, []tcase{
		{name: "first", slices: s, claims: claims(at.Claim("c").FirstAvailable("r", big, small)), want: [][]string{{"r/big=pool/big"}}},
		{name: "second when first taken", slices: s, allocated: claims(at.Claim("o").Allocated(at.Result("x", "driver.example.com", "pool", "big"))),
			claims: claims(at.Claim("c").FirstAvailable("r", big, small)), want: [][]string{{"r/small=pool/small-0", "r/small=pool/small-1"}}},
		{name: "backtrack into second for a later request", slices: s,
			claims: claims(at.Claim("c").FirstAvailable("r", big, small).Request(at.Request("x", "any").Selector(`device.attributes["driver.example.com"].size == "big"`))),
			want:   [][]string{{"r/small=pool/small-0", "r/small=pool/small-1", "x=pool/big"}}},
	})
}

func TestTaints(t *testing.T) {
	s := simple(at.Device("d0").Taint("k", "v", resourcev1.DeviceTaintEffectNoSchedule), at.Device("d1").Taint("k", "v", resourcev1.DeviceTaintEffectNone),
		at.Device("d2").Taint("k", "v", "FutureEffect"))
	runCases(t, []tcase{
		{name: "NoSchedule blocks, None and unknown do not", slices: s, claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(2))), want: [][]string{{"r=pool/d1", "r=pool/d2"}}},
		{name: "toleration", slices: s, claims: claims(at.Claim("c").Request(at.Request("r", "any").Tolerate("k", resourcev1.DeviceTaintEffectNoSchedule))), want: [][]string{{"r=pool/d0"}}},
		{name: "NoExecute blocks", slices: simple(at.Device("d0").Taint("k", "", resourcev1.DeviceTaintEffectNoExecute)), claims: claims(at.Claim("c").Request(at.Request("r", "any"))), unfit: true},
	})
}

func TestConstraints(t *testing.T) {
	s := simple(at.Device("a0").Str("numa", "0").Int("id", 1), at.Device("b1").Str("numa", "1").Int("id", 1),
		at.Device("c1").Str("numa", "1").Int("id", 2), at.Device("d").Strs("numas", "0", "1").Int("id", 3))
	runCases(t, []tcase{
		{name: "match", slices: s, claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(2)).MatchAttribute("driver.example.com/numa")),
			want: [][]string{{"r=pool/b1", "r=pool/c1"}}},
		{name: "match across requests", slices: s, claims: claims(at.Claim("c").Request(at.Request("x", "any")).Request(at.Request("y", "any")).MatchAttribute("driver.example.com/numa", "x", "y")),
			want: [][]string{{"x=pool/b1", "y=pool/c1"}}},
		{name: "distinct", slices: s, claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(3)).DistinctAttribute("driver.example.com/id")),
			want: [][]string{{"r=pool/a0", "r=pool/c1", "r=pool/d"}}},
		{name: "list attribute intersects", slices: s, claims: claims(at.Claim("c").Request(at.Request("x", "any").Selector(`device.attributes["driver.example.com"].id == 3`)).
			Request(at.Request("y", "any")).MatchAttribute("driver.example.com/numas")), unfit: true},
		{name: "constraint on one subrequest", slices: s, claims: claims(at.Claim("c").FirstAvailable("r", at.Request("s", "any").Count(2)).MatchAttribute("driver.example.com/numa", "r/s")),
			want: [][]string{{"r/s=pool/b1", "r/s=pool/c1"}}},
		{name: "all with constraint violated is fatal", slices: s, claims: claims(at.Claim("c").Request(at.Request("r", "any").All()).MatchAttribute("driver.example.com/numa")),
			fatal: "constraint"},
	})
}

func TestCounters(t *testing.T) {
	counters := at.Slice("c").Node("node-1").Count(2).Counters("set", "mem", "4")
	devs := at.Slice("d").Node("node-1").Count(2).Device(at.Device("big").Consumes("set", "mem", "3"), at.Device("s0").Consumes("set", "mem", "2"), at.Device("s1").Consumes("set", "mem", "2"))
	withMixins := at.Slice("m").Node("node-1").Pool("mx").CounterSetMixin("base", "mem", "4").CounterSetWithIncludes("set", []string{"base"})
	withMixinDevs := at.Slice("n").Node("node-1").Pool("mx").Count(2).ConsumptionMixin("two", "mem", "2").Device(at.Device("m0").ConsumesIncludes("set", "two"), at.Device("m1").ConsumesIncludes("set", "two"), at.Device("m2").ConsumesIncludes("set", "two"))
	withMixins.Count(2)
	runCases(t, []tcase{
		{name: "first fit backtracks off the big one", slices: []*api.ResourceSlice{counters.Obj(), devs.Obj()},
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(2))), want: [][]string{{"r=pool/s0", "r=pool/s1"}}},
		{name: "allocated consumes", slices: []*api.ResourceSlice{counters.Obj(), devs.Obj()}, allocated: claims(at.Claim("o").Allocated(at.Result("r", "driver.example.com", "pool", "s0"))),
			claims: claims(at.Claim("c").Request(at.Request("r", "any"))), want: [][]string{{"r=pool/s1"}}},
		{name: "mixins", slices: []*api.ResourceSlice{withMixins.Obj(), withMixinDevs.Obj()},
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(3))), unfit: true},
		{name: "mixins two fit", slices: []*api.ResourceSlice{withMixins.Obj(), withMixinDevs.Obj()},
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(2))), want: [][]string{{"r=mx/m0", "r=mx/m1"}}},
	})
}

func TestPools(t *testing.T) {
	incomplete := at.Slice("i").Node("node-1").Pool("a").Count(2).Device(at.Device("x")).Obj()
	other := at.Slice("o").Node("node-1").Pool("b").Device(at.Device("y")).Obj()
	dupA := at.Slice("d1").Node("node-1").Pool("a").Count(2).Device(at.Device("x")).Obj()
	dupB := at.Slice("d2").Node("node-1").Pool("a").Count(2).Device(at.Device("x")).Obj()
	runCases(t, []tcase{
		{name: "incomplete skipped", slices: []*api.ResourceSlice{incomplete, other}, claims: claims(at.Claim("c").Request(at.Request("r", "any"))), want: [][]string{{"r=b/y"}}},
		{name: "incomplete and all is fatal", slices: []*api.ResourceSlice{incomplete, other}, claims: claims(at.Claim("c").Request(at.Request("r", "any").All())), fatal: "being updated"},
		{name: "invalid skipped when another pool serves", slices: []*api.ResourceSlice{dupA, dupB, other}, claims: claims(at.Claim("c").Request(at.Request("r", "any"))), want: [][]string{{"r=b/y"}}},
		{name: "invalid pool and nothing fits is unfit", slices: []*api.ResourceSlice{dupA, dupB, other}, claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(2))), unfit: true},
		{name: "invalid pool and all is fatal", slices: []*api.ResourceSlice{dupA, dupB, other}, claims: claims(at.Claim("c").Request(at.Request("r", "any").All())), fatal: "currently invalid"},
		{name: "other node ignored", slices: []*api.ResourceSlice{at.Slice("s").Node("node-2").Device(at.Device("z")).Obj()}, claims: claims(at.Claim("c").Request(at.Request("r", "any"))), unfit: true},
	})
}

func TestCapacity(t *testing.T) {
	policy := &resourcev1.CapacityRequestPolicy{Default: qty("1Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qty("1Gi"), Step: qty("1Gi"), Max: qty("4Gi")}}
	shared := simple(at.Device("nic").Multi().CapacityPolicy("bw", "8Gi", policy))
	e := &env{slices: shared, classes: []*resourcev1.DeviceClass{anyClass}}
	res, err := e.run(t, node1, at.Claim("c").Request(at.Request("a", "any").Capacity("bw", "1500Mi")).Request(at.Request("b", "any").Capacity("bw", "3Gi")).Request(at.Request("c", "any")).Obj())
	if err != nil {
		t.Fatal(err)
	}
	got := res[0].Devices.Results
	if len(got) != 3 || qs(got[0].ConsumedCapacity["bw"]) != "2Gi" || qs(got[1].ConsumedCapacity["bw"]) != "3Gi" || qs(got[2].ConsumedCapacity["bw"]) != "1Gi" || got[0].ShareID == nil {
		t.Fatalf("rounding/sharing wrong: %+v", got)
	}
	_, err = e.run(t, node1, at.Claim("c").Request(at.Request("a", "any").Capacity("bw", "5Gi")).Obj())
	if !IsUnfit(err) {
		t.Fatalf("above max must not fit: %v", err)
	}
	// Allocated shares count.
	prev := at.Result("x", "driver.example.com", "pool", "nic")
	prev.ShareID = ptrUID("s")
	prev.ConsumedCapacity = map[resourcev1.QualifiedName]resourceQuantity{"bw": *qty("7Gi")}
	e.allocated = claims(at.Claim("o").Allocated(prev))
	_, err = e.run(t, node1, at.Claim("c").Request(at.Request("a", "any").Capacity("bw", "2Gi")).Obj())
	if !IsUnfit(err) {
		t.Fatalf("allocated capacity must count: %v", err)
	}
	if _, err = e.run(t, node1, at.Claim("c").Request(at.Request("a", "any").Capacity("bw", "1Gi")).Obj()); err != nil {
		t.Fatal(err)
	}
	// Valid values round up.
	vv := &resourcev1.CapacityRequestPolicy{Default: qty("1"), ValidValues: []resourceQuantity{*qty("1"), *qty("4"), *qty("8")}}
	e = &env{slices: simple(at.Device("d").Multi().CapacityPolicy("slots", "8", vv)), classes: []*resourcev1.DeviceClass{anyClass}}
	res, err = e.run(t, node1, at.Claim("c").Request(at.Request("a", "any").Capacity("slots", "3")).Obj())
	if err != nil || qs(res[0].Devices.Results[0].ConsumedCapacity["slots"]) != "4" {
		t.Fatalf("validValues: %v %v", res, err)
	}
}

func TestNodesAndResults(t *testing.T) {
	// KEP-4815 TPU example: a 4x4 slice spans four nodes; one device per
	// node-set with its own node selector.
	tpu := at.Slice("tpu").AllNodes().PerDeviceNodeSelection().Device(
		at.Device("tpu-4x4").NodeSelector("tpu.example.com/slice", "s1").Str("topology", "4x4"),
		at.Device("tpu-1x1-node-1").Node("node-1").Str("topology", "1x1"))
	tpu.Obj().Spec.AllNodes = nil
	e := &env{slices: []*api.ResourceSlice{tpu.Obj()}, classes: []*resourcev1.DeviceClass{anyClass}}
	n := at.Node("node-1", "tpu.example.com/slice", "s1")
	res, err := e.run(t, n, at.Claim("c").Request(at.Request("r", "any").Selector(`device.attributes["driver.example.com"].topology == "4x4"`)).Obj())
	if err != nil {
		t.Fatal(err)
	}
	ns := res[0].NodeSelector
	if ns == nil || len(ns.NodeSelectorTerms) != 1 || ns.NodeSelectorTerms[0].MatchExpressions[0].Key != "tpu.example.com/slice" {
		t.Fatalf("want the device's own selector over the four nodes, got %v", ns)
	}
	res, err = e.run(t, n, at.Claim("c").Request(at.Request("r", "any").Selector(`device.attributes["driver.example.com"].topology == "1x1"`)).Obj())
	if err != nil || res[0].NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0] != "node-1" {
		t.Fatalf("per-device nodeName pins to node: %v %v", res, err)
	}
	if _, err = e.run(t, at.Node("node-9"), at.Claim("c").Request(at.Request("r", "any")).Obj()); !IsUnfit(err) {
		t.Fatalf("node without matching devices: %v", err)
	}
	// Binding conditions: pools with them come last; results carry them.
	bc := at.Slice("a").Pool("a").Node("node-1").Device(at.Device("bound").BindingConditions("ready").BindsToNode()).Obj()
	plain := at.Slice("b").Pool("b").Node("node-1").Device(at.Device("plain")).Obj()
	e = &env{slices: []*api.ResourceSlice{bc, plain}, classes: []*resourcev1.DeviceClass{anyClass}}
	res, err = e.run(t, node1, at.Claim("c").Request(at.Request("r", "any").Count(2)).Obj())
	if err != nil || res[0].Devices.Results[0].Device != "plain" || res[0].Devices.Results[1].BindingConditions[0] != "ready" {
		t.Fatalf("binding conditions: %v %v", res, err)
	}
}

func TestMIGFourRequests(t *testing.T) {
	e := &env{slices: gpuNode("node-1", 8), classes: []*resourcev1.DeviceClass{gpuClass, migClass}}
	c := at.Claim("c").Request(mig("a", "1g.10gb")).Request(mig("b", "1g.10gb")).Request(mig("c", "2g.20gb")).Request(mig("d", "3g.40gb")).
		MatchAttribute("gpu.example.com/parentUUID").Obj()
	res, err := e.run(t, node1, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a=node-1/gpu-0-mig-1g.10gb-0", "b=node-1/gpu-0-mig-1g.10gb-1", "c=node-1/gpu-0-mig-2g.20gb-2", "d=node-1/gpu-0-mig-3g.40gb-4"}
	if got := devices(res[0]); !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	verify(t, e, node1, []*resourcev1.ResourceClaim{c}, res)
}

func TestCountSevenOnlyLastGPU(t *testing.T) {
	e := countSevenEnv()
	c := at.Claim("c").Request(mig("r", "1g.10gb").Count(7)).MatchAttribute("gpu.example.com/parentUUID").Obj()
	res, err := e.run(t, node1, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res[0].Devices.Results {
		if !strings.HasPrefix(d.Device, "gpu-7-") {
			t.Fatalf("want GPU 7 only, got %v", devices(res[0]))
		}
	}
	verify(t, e, node1, []*resourcev1.ResourceClaim{c}, res)
}

// countSevenEnv: GPUs 0-6 each have one 1g placement taken, GPU 7 is free.
func countSevenEnv() *env {
	var rs []resourcev1.DeviceRequestAllocationResult
	for g := 0; g < 7; g++ {
		rs = append(rs, at.Result("r", gpuDriver, "node-1", at.Name("gpu", g)+"-mig-1g.10gb-6"))
	}
	return &env{slices: gpuNode("node-1", 8), classes: []*resourcev1.DeviceClass{gpuClass, migClass},
		allocated: claims(at.Claim("busy").Allocated(rs...))}
}

func TestExplanation(t *testing.T) {
	e := &env{slices: gpuNode("node-1", 2), classes: []*resourcev1.DeviceClass{gpuClass, migClass}, allocated: claims(at.Claim("b").Allocated(at.Result("r", gpuDriver, "node-1", "gpu-0")))}
	_, err := e.run(t, node1, at.Claim("c").Request(mig("r", "7g.80gb").Count(2)).Obj())
	var u *UnfitError
	if !errors.As(err, &u) {
		t.Fatalf("want unfit, got %v", err)
	}
	r := u.Explanation.Claims[0].Requests[0]
	if r.Candidates != 1 || r.Rejected[ReasonCounterExhausted] != 1 || r.Rejected[ReasonSelector] != 34 || r.SatisfiableAlone || r.Rejected[ReasonAllocated] != 1 {
		t.Fatalf("explanation: %+v\n%s", r, u.Explanation)
	}
	if !strings.Contains(u.Explanation.String(), "gpu-0-counters/") {
		t.Fatalf("counter detail missing:\n%s", u.Explanation)
	}
}

func TestContextCancel(t *testing.T) {
	e := countSevenEnv()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.alloc(t).Allocate(ctx, node1, claims(at.Claim("c").Request(mig("r", "1g.10gb").Count(7)).MatchAttribute("gpu.example.com/parentUUID")))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

// cancelLater is a context that reports cancellation from its n-th Err
// call on: cancellation arrives during the search at a point that does not
// depend on timing.
type cancelLater struct {
	context.Context
	calls atomic.Int64
	n     int64
}

func (c *cancelLater) Err() error {
	if c.calls.Add(1) >= c.n {
		return context.Canceled
	}
	return nil
}

// The search must notice a cancellation while it runs, not only before it
// starts: this scenario searches tens of thousands of nodes.
func TestContextCancelDuringSearch(t *testing.T) {
	f := "testdata/regressions/seed2-284-dractl-slow.yaml"
	hdr := readHeader(t, f)
	a, node, pending := loadRegression(t, f, hdr["expect-node"])
	ctx := &cancelLater{Context: context.Background(), n: 2} // Allocate's own first check passes
	_, err := a.Allocate(ctx, node, pending)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled from inside the search, got %v", err)
	}
	full, _, _ := loadRegression(t, f, hdr["expect-node"])
	if _, err := full.Allocate(context.Background(), node, pending); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("uncancelled run: want an unfit or fatal answer, got %v", err)
	}
	if stopped, all := a.Stats().SearchNodes, full.Stats().SearchNodes; stopped >= all/10 {
		t.Errorf("cancelled after %d of %d search nodes; want it noticed early", stopped, all)
	}
}

// TestDeadlineDuringSearch: AllocateWithin's bound ends a long search
// with context.DeadlineExceeded, read from the clock where the search
// checks ctx (no timer), and early; a search shorter than one check
// interval finishes whatever the bound.
func TestDeadlineDuringSearch(t *testing.T) {
	f := "testdata/regressions/seed2-284-dractl-slow.yaml"
	hdr := readHeader(t, f)
	a, node, pending := loadRegression(t, f, hdr["expect-node"])
	_, err := a.Plan(pending).AllocateWithin(context.Background(), node, time.Nanosecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want context.DeadlineExceeded from inside the search, got %v", err)
	}
	full, _, _ := loadRegression(t, f, hdr["expect-node"])
	if _, err := full.Plan(pending).AllocateWithin(context.Background(), node, time.Hour); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("run within an hour: want an unfit or fatal answer, got %v", err)
	}
	if stopped, all := a.Stats().SearchNodes, full.Stats().SearchNodes; stopped >= all/10 {
		t.Errorf("stopped after %d of %d search nodes; want the deadline noticed early", stopped, all)
	}
	e := &env{slices: gpuNode("node-1", 1), classes: []*resourcev1.DeviceClass{gpuClass, migClass}}
	if _, err := e.alloc(t).Plan(claims(at.Claim("c").Request(mig("r", "1g.10gb")))).AllocateWithin(context.Background(), node1, time.Nanosecond); err != nil {
		t.Errorf("a one-step search under a 1ns bound: %v", err)
	}
}

func TestBestFitPacks(t *testing.T) {
	e := &env{slices: gpuNode("node-1", 2), classes: []*resourcev1.DeviceClass{gpuClass, migClass},
		allocated: claims(at.Claim("b").Allocated(at.Result("r", gpuDriver, "node-1", "gpu-1-mig-1g.10gb-0"))), opts: Options{Strategy: BestFit}}
	res, err := e.run(t, node1, at.Claim("c").Request(mig("r", "1g.10gb")).Obj())
	if err != nil {
		t.Fatal(err)
	}
	// First fit would take GPU 0 (empty); best fit packs the used GPU 1 and
	// picks the placement that blocks the fewest other profiles.
	if d := res[0].Devices.Results[0].Device; !strings.HasPrefix(d, "gpu-1-") {
		t.Fatalf("best fit should pack GPU 1, got %s", d)
	}
}

func TestConcurrentUse(t *testing.T) {
	e := &env{slices: gpuNode("node-1", 8), classes: []*resourcev1.DeviceClass{gpuClass, migClass}}
	a := e.alloc(t)
	done := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			_, err := a.Allocate(context.Background(), node1, claims(at.Claim("c").Request(mig("r", "1g.10gb").Count(3)).MatchAttribute("gpu.example.com/parentUUID")))
			done <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

var _ = pool.Assemble

// TestBestFitWastesLeast: after keeping the last device of every size,
// best-fit takes the device that puts the least of its GPU out of reach.
func TestBestFitWastesLeast(t *testing.T) {
	held := func(device string) []*resourcev1.ResourceClaim {
		return claims(at.Claim("held").Allocated(at.Result("r", gpuDriver, "node-1", device)))
	}
	for _, tc := range []struct {
		name    string
		gpus    int
		held    []*resourcev1.ResourceClaim
		profile string
		want    string
	}{
		// On the seventh slice a 1g.10gb leaves the eighth to nobody (only
		// 1g.20gb, 3g and 7g instances reach it, and all overlap the
		// seventh); beside the 3g it leaves the rest to a 1g.10gb and a
		// 1g.20gb. Counting lost devices alone took the seventh. The empty
		// GPU offers every size, so no size is at stake.
		{name: "beside a 3g", gpus: 2, held: held("gpu-0-mig-3g.40gb-0"), profile: "1g.10gb", want: "gpu-0-mig-1g.10gb-4"},
		{name: "empty GPUs", gpus: 2, profile: "1g.10gb", want: "gpu-0-mig-1g.10gb-0"},
		// The free half of a pair is the one place a 1g.10gb wastes nothing.
		{name: "the other half of a pair", gpus: 2, held: held("gpu-1-mig-1g.10gb-4"), profile: "1g.10gb", want: "gpu-1-mig-1g.10gb-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{slices: gpuNode("node-1", tc.gpus), classes: []*resourcev1.DeviceClass{gpuClass, migClass},
				allocated: tc.held, opts: Options{Strategy: BestFit}}
			res, err := e.run(t, node1, at.Claim("c").Request(mig("r", tc.profile)).Obj())
			if err != nil {
				t.Fatal(err)
			}
			if d := res[0].Devices.Results[0].Device; d != tc.want {
				t.Errorf("best-fit took %s, want %s", d, tc.want)
			}
		})
	}
}

// TestExplanationNamesTaintedDevices: a device rejected for a taint is
// named with the first taint the request does not tolerate; tolerated
// taints and taints that do not block allocation name nothing.
func TestExplanationNamesTaintedDevices(t *testing.T) {
	const drv = "taints.example.com"
	slice := at.Slice("s").Driver(drv).Pool("node-1").Node("node-1").Count(1).Device(
		at.Device("d-0").Taint("example.com/ecc", "errors", resourcev1.DeviceTaintEffectNoSchedule),
		at.Device("d-1").Taint("example.com/tolerated", "", resourcev1.DeviceTaintEffectNoExecute).Taint("example.com/drain", "", resourcev1.DeviceTaintEffectNoExecute),
		at.Device("d-2").Taint("example.com/info", "x", resourcev1.DeviceTaintEffectNone),
		at.Device("d-3").Taint("example.com/tolerated", "", resourcev1.DeviceTaintEffectNoExecute)).Obj()
	e := &env{slices: []*api.ResourceSlice{slice}, classes: []*resourcev1.DeviceClass{at.Class("c", `device.driver == "`+drv+`"`)}}
	_, err := e.run(t, node1, at.Claim("claim").Request(at.Request("r", "c").Count(4).Tolerate("example.com/tolerated", resourcev1.DeviceTaintEffectNoExecute)).Obj())
	var u *UnfitError
	if !errors.As(err, &u) {
		t.Fatalf("want unfit, got %v", err)
	}
	r := u.Explanation.Claims[0].Requests[0]
	want := map[string]string{
		drv + "/node-1/d-0": "example.com/ecc=errors:NoSchedule",
		drv + "/node-1/d-1": "example.com/drain:NoExecute",
	}
	if r.Rejected[ReasonTaint] != 2 || r.Candidates != 2 || !maps.Equal(r.Taints, want) {
		t.Errorf("explanation: %+v, want taints %v", r, want)
	}
}
