package allocator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/features"
)

// gateCase runs claims with one feature gate off and with every gate on:
// off, the allocator must answer as upstream's does with the gate off.
type gateCase struct {
	name   string
	gate   features.Gate
	slices []*api.ResourceSlice
	node   *corev1.Node
	claims []*resourcev1.ResourceClaim
	// off and on: the devices per claim ("request=pool/device"), "unfit",
	// or "fatal: <substring>".
	off, on []string
	// unchecked: the independent checker (verify) knows neither derived
	// attributes nor scalar-only constraints, so it cannot judge the result.
	unchecked bool
}

func (gc gateCase) run(t *testing.T, set features.Set) []string {
	t.Helper()
	e := &env{slices: gc.slices, classes: []*resourcev1.DeviceClass{anyClass, gpuClass}, opts: Options{Features: set}}
	node := gc.node
	if node == nil {
		node = node1
	}
	res, err := e.run(t, node, gc.claims...)
	var fe *FatalError
	switch {
	case errors.As(err, &fe):
		return []string{"fatal: " + err.Error()}
	case IsUnfit(err):
		return []string{"unfit"}
	case err != nil:
		t.Fatalf("neither fit, unfit nor fatal: %v", err)
	}
	if !gc.unchecked {
		verify(t, e, node, gc.claims, res)
	}
	var out []string
	for _, r := range res {
		out = append(out, strings.Join(devices(r), " "))
	}
	return out
}

func matchesWant(got, want []string) bool {
	if len(want) == 1 && strings.HasPrefix(want[0], "fatal: ") {
		return len(got) == 1 && strings.HasPrefix(got[0], "fatal: ") && strings.Contains(got[0], strings.TrimPrefix(want[0], "fatal: "))
	}
	return slices.Equal(got, want)
}

func TestFeatureGates(t *testing.T) {
	one := func(devs ...*at.DeviceBuilder) []*api.ResourceSlice {
		return []*api.ResourceSlice{at.Slice("s").Node("node-1").Device(devs...).Obj()}
	}
	counterPool := []*api.ResourceSlice{
		at.Slice("a-counters").Node("node-1").Pool("p").Count(2).Counters("gpu", "mem", "2").Obj(),
		at.Slice("b-devices").Node("node-1").Pool("p").Count(2).Device(
			at.Device("part").Consumes("gpu", "mem", "1"), at.Device("plain")).Obj(),
	}
	nodeOps := []*api.ResourceSlice{at.Slice("s").Node("node-1").SkipNodeOperations("Prepare").Device(at.Device("d")).Obj()}
	withOps := at.Node("node-1")
	withOps.Status.DeclaredFeatures = []string{features.NodeFeatureOptionalNodeOperations}
	compatPool := []*api.ResourceSlice{
		at.Slice("a").Node("node-1").Pool("p").Count(2).Counters("gpu", "mem", "2").Obj(),
		at.Slice("b").Node("node-1").Pool("p").Count(2).Device(at.Device("g").ConsumesGroups("gpu", []string{"x"}, "mem", "1")).Obj(),
		at.Slice("o").Node("node-1").Pool("z-other").Device(at.Device("o")).Obj(),
	}
	lists := one(at.Device("d0").Strs("driver.example.com/l", "a", "b"), at.Device("d1").Strs("driver.example.com/l", "b", "c"))
	cases := []gateCase{
		{name: "admin access", gate: features.AdminAccess, slices: one(at.Device("d")),
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Admin())),
			off:    []string{"fatal: admin access is requested, but the feature is disabled"}, on: []string{"r=pool/d"}},
		{name: "prioritized list", gate: features.PrioritizedList, slices: one(at.Device("d")),
			claims: claims(at.Claim("c").FirstAvailable("r", at.Request("a", "any"))),
			off:    []string{"fatal: claim default/c, request r: has subrequests, but the DRAPrioritizedList feature is disabled"}, on: []string{"r/a=pool/d"}},
		{name: "consumable capacity request", gate: features.ConsumableCapacity, slices: one(at.Device("d").Capacity("bw", "10")),
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Capacity("bw", "1"))),
			off:    []string{"fatal: has capacity requests, but the DRAConsumableCapacity feature is disabled"}, on: []string{"r=pool/d"}},
		{name: "consumable capacity subrequest", gate: features.ConsumableCapacity, slices: one(at.Device("d").Capacity("bw", "10")),
			claims: claims(at.Claim("c").FirstAvailable("r", at.Request("a", "any").Capacity("bw", "1"))),
			off:    []string{"fatal: claim default/c, subrequest a: has capacity requests"}, on: []string{"r/a=pool/d"}},
		{name: "consumable capacity: shared device taken whole", gate: features.ConsumableCapacity, slices: one(at.Device("d").Multi().Capacity("bw", "10")),
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(2))),
			off:    []string{"unfit"}, on: []string{"unfit"}},
		{name: "derived attributes", gate: features.DerivedAttributes, slices: one(at.Device("d").Str("numa", "0")),
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Derived("example.com/n", `device.attributes["driver.example.com"].numa`)).MatchAttribute("example.com/n")),
			off:    []string{"fatal: cannot handle request with derived attributes, the feature is disabled"}, on: []string{"r=pool/d"}, unchecked: true},
		{name: "binding conditions", gate: features.DeviceBindingConditions, slices: one(at.Device("b").BindingConditions("ready"), at.Device("d")),
			claims: claims(at.Claim("c").Request(at.Request("r", "any"))),
			off:    []string{"r=pool/d"}, on: []string{"r=pool/b"}},
		{name: "claim device status", gate: features.ResourceClaimDeviceStatus, slices: one(at.Device("b").BindingConditions("ready"), at.Device("d")),
			claims: claims(at.Claim("c").Request(at.Request("r", "any"))),
			off:    []string{"r=pool/d"}, on: []string{"r=pool/b"}},
		{name: "device taints", gate: features.DeviceTaints, slices: one(at.Device("d").Taint("k", "v", resourcev1.DeviceTaintEffectNoSchedule)),
			claims: claims(at.Claim("c").Request(at.Request("r", "any"))),
			off:    []string{"r=pool/d"}, on: []string{"unfit"}},
		{name: "partitionable: counter consumers are not allocated", gate: features.PartitionableDevices, slices: counterPool,
			claims: claims(at.Claim("c").Request(at.Request("r", "any"))),
			off:    []string{"r=p/plain"}, on: []string{"r=p/part"}},
		{name: "partitionable: per-device node selection slices are ignored", gate: features.PartitionableDevices,
			slices: []*api.ResourceSlice{at.Slice("s").PerDeviceNodeSelection().Device(at.Device("d").Node("node-1")).Obj()},
			claims: claims(at.Claim("c").Request(at.Request("r", "any"))),
			off:    []string{"unfit"}, on: []string{"r=pool/d"}},
		{name: "optional node operations", gate: features.OptionalNodeOperations, slices: nodeOps, node: withOps,
			claims: claims(at.Claim("c").Request(at.Request("r", "any"))),
			off:    []string{"unfit"}, on: []string{"r=pool/d"}},
		{name: "compatibility groups: slices using them are ignored, which leaves the pool incomplete", gate: features.DeviceCompatibilityGroups, slices: compatPool,
			claims: claims(at.Claim("c").Request(at.Request("r", "any"))),
			off:    []string{"r=z-other/o"}, on: []string{"r=p/g"}},
		{name: "list attributes", gate: features.ListTypeAttributes, slices: lists,
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(2)).MatchAttribute("driver.example.com/l")),
			off:    []string{"unfit"}, on: []string{"r=pool/d0 r=pool/d1"}},
		{name: "list attributes: a list first value matches nothing else", gate: features.ListTypeAttributes,
			slices: one(at.Device("d0").Strs("driver.example.com/l", "a"), at.Device("d1").Str("driver.example.com/l", "a")),
			claims: claims(at.Claim("c").Request(at.Request("r", "any").Count(2)).DistinctAttribute("driver.example.com/l")),
			off:    []string{"r=pool/d0 r=pool/d1"}, on: []string{"unfit"}, unchecked: true},
	}
	for _, gc := range cases {
		t.Run(gc.name, func(t *testing.T) {
			if got := gc.run(t, features.All()); !matchesWant(got, gc.on) {
				t.Errorf("all gates on: got %q, want %q", got, gc.on)
			}
			if got := gc.run(t, features.All().With(gc.gate, false)); !matchesWant(got, gc.off) {
				t.Errorf("%s off: got %q, want %q", gc.gate, got, gc.off)
			}
		})
	}
}

// With DRAFractionalCapacityRange off, a range with a fractional step is
// rounded in whole units, as upstream does.
func TestFractionalCapacityRangeGate(t *testing.T) {
	policy := &resourcev1.CapacityRequestPolicy{ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qty("500m"), Step: qty("500m")}}
	slices := []*api.ResourceSlice{at.Slice("s").Node("node-1").Device(at.Device("d").Multi().CapacityPolicy("bw", "10", policy)).Obj()}
	claim := at.Claim("c").Request(at.Request("r", "any").Capacity("bw", "1200m")).Obj()
	consumed := func(set features.Set) string {
		e := &env{slices: slices, classes: []*resourcev1.DeviceClass{anyClass}, opts: Options{Features: set}}
		res, err := e.run(t, node1, claim)
		if err != nil {
			return err.Error()
		}
		q := res[0].Devices.Results[0].ConsumedCapacity["bw"]
		return q.String()
	}
	if got := consumed(features.All()); got != "1500m" {
		t.Errorf("fractional on: consumed %s, want 1500m", got)
	}
	if got := consumed(features.All().With(features.FractionalCapacityRange, false)); got == "1500m" {
		t.Errorf("fractional off: consumed %s, want whole-unit rounding", got)
	}
}

func TestDerivedAttributes(t *testing.T) {
	numa := func(name, key, value string) *at.DeviceBuilder { return at.Device(name).Str(key, value) }
	a := at.Slice("a").Node("node-1").Driver("a.example.com").Pool("pa").Device(
		numa("a0", "numa", "0"), numa("a1", "numa", "1")).Obj()
	b := at.Slice("b").Node("node-1").Driver("b.example.com").Pool("pb").Device(
		numa("b1", "numaNode", "1"), numa("b2", "numaNode", "2")).Obj()
	classA, classB := at.Class("a", `device.driver == "a.example.com"`), at.Class("b", `device.driver == "b.example.com"`)
	run := func(t *testing.T, cs ...*resourcev1.ResourceClaim) ([]*resourcev1.AllocationResult, error) {
		e := &env{slices: []*api.ResourceSlice{a, b}, classes: []*resourcev1.DeviceClass{classA, classB}}
		return e.run(t, node1, cs...)
	}
	t.Run("requests derive one key from differently named attributes", func(t *testing.T) {
		res, err := run(t, at.Claim("c").
			Request(at.Request("x", "a").Derived("example.com/numa", `device.attributes["a.example.com"].numa`)).
			Request(at.Request("y", "b").Derived("example.com/numa", `device.attributes["b.example.com"].numaNode`)).
			MatchAttribute("example.com/numa", "x", "y").Obj())
		if err != nil {
			t.Fatal(err)
		}
		if got := devices(res[0]); !slices.Equal(got, []string{"x=pa/a1", "y=pb/b1"}) {
			t.Errorf("got %v, want x=pa/a1 y=pb/b1 (a0 has no partner)", got)
		}
	})
	t.Run("a subrequest whose derived attribute cannot match falls back to the next", func(t *testing.T) {
		res, err := run(t, at.Claim("c").
			FirstAvailable("x",
				at.Request("zero", "a").Selector(`device.attributes["a.example.com"].numa == "0"`).Derived("example.com/numa", `device.attributes["a.example.com"].numa`),
				at.Request("any", "a").Derived("example.com/numa", `device.attributes["a.example.com"].numa`)).
			Request(at.Request("y", "b").Derived("example.com/numa", `device.attributes["b.example.com"].numaNode`)).
			MatchAttribute("example.com/numa", "x", "y").Obj())
		if err != nil {
			t.Fatal(err)
		}
		if got := devices(res[0]); !slices.Equal(got, []string{"x/any=pa/a1", "y=pb/b1"}) {
			t.Errorf("got %v, want x/any=pa/a1 y=pb/b1", got)
		}
	})
	t.Run("a derived attribute shadows the device's own, for its request only", func(t *testing.T) {
		res, err := run(t, at.Claim("c").
			Request(at.Request("x", "a").Derived("a.example.com/numa", `"1"`)).
			Request(at.Request("y", "a")).
			MatchAttribute("a.example.com/numa", "x", "y").Obj())
		if err != nil {
			t.Fatal(err)
		}
		if got := devices(res[0]); !slices.Equal(got, []string{"x=pa/a0", "y=pa/a1"}) {
			t.Errorf("got %v, want x=pa/a0 (derived \"1\") y=pa/a1 (own numa 1)", got)
		}
	})
	t.Run("a runtime error is fatal", func(t *testing.T) {
		_, err := run(t, at.Claim("c").
			Request(at.Request("x", "a").Derived("example.com/m", `device.attributes["a.example.com"].missing`)).
			MatchAttribute("example.com/m", "x").Obj())
		var fe *FatalError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "no such key: missing") || !strings.Contains(err.Error(), "evaluate derived attribute example.com/m") {
			t.Fatalf("want a fatal evaluation error, got %v", err)
		}
	})
	t.Run("values of different types do not match", func(t *testing.T) {
		_, err := run(t, at.Claim("c").
			Request(at.Request("x", "a").Count(2).Derived("example.com/m", `device.attributes["a.example.com"].numa == "0" ? dyn("0") : dyn(1)`)).
			MatchAttribute("example.com/m", "x").Obj())
		if !IsUnfit(err) {
			t.Fatalf("want unfit, got %v", err)
		}
	})
}

// An attribute without a value cannot be handed to CEL; upstream converts
// every attribute before evaluating a selector, so every selector fails on
// such a device, whatever attribute it reads.
func TestAttributeWithoutValueFailsSelectors(t *testing.T) {
	e := &env{slices: simple(at.Device("d").NoValue("broken")), classes: []*resourcev1.DeviceClass{gpuClass, anyClass}}
	_, err := e.run(t, node1, at.Claim("c").Request(at.Request("r", "any").Selector(`device.driver != ""`)).Obj())
	if !strings.Contains(fmtErr(err), "attribute broken: unsupported attribute value") {
		t.Fatalf("want a fatal 'unsupported attribute value', got %v", err)
	}
	// Without any selector nothing reads the device's attributes.
	if _, err := e.run(t, node1, at.Claim("c").Request(at.Request("r", "any")).Obj()); err != nil {
		t.Fatalf("no selector: %v", err)
	}
}

func fmtErr(err error) string {
	var fe *FatalError
	if !errors.As(err, &fe) {
		return "not fatal: " + errString(err)
	}
	return err.Error()
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// The claim limit prunes: once a request has taken 32 devices, no choice
// of those devices lets the next request fit, so the search goes straight
// back to the next subrequest instead of trying all C(64,32) choices.
func TestClaimLimitPrunes(t *testing.T) {
	var devs []*at.DeviceBuilder
	for i := range 2 * maxResults {
		devs = append(devs, at.Device(at.Name("d", i)))
	}
	e := &env{slices: simple(devs...), classes: []*resourcev1.DeviceClass{anyClass}}
	half := int64(maxResults / 2)
	claim := at.Claim("c").
		FirstAvailable("r0", at.Request("all", "any").Count(maxResults), at.Request("half", "any").Count(half)).
		FirstAvailable("r1", at.Request("all", "any").Count(maxResults), at.Request("half", "any").Count(half)).Obj()
	a := e.alloc(t)
	res, err := a.Allocate(context.Background(), node1, []*resourcev1.ResourceClaim{claim})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res[0].Devices.Results); n != maxResults {
		t.Fatalf("got %d devices, want %d", n, maxResults)
	}
	// Upstream's search takes 75 steps here; without the bound it would
	// not end.
	if n := a.Stats().SearchNodes; n != 75 {
		t.Errorf("search nodes = %d, want upstream's 75", n)
	}
}

// Messages carry upstream's words where its users search for them, and
// say what is true.
func TestUpstreamWording(t *testing.T) {
	var devs []*at.DeviceBuilder
	for i := range maxResults + 1 {
		devs = append(devs, at.Device(at.Name("d", i)))
	}
	e := &env{slices: simple(devs...), classes: []*resourcev1.DeviceClass{anyClass}}
	_, err := e.run(t, node1, at.Claim("c").Request(at.Request("a", "any").Count(maxResults)).Request(at.Request("b", "any")).Obj())
	if want := "claim default/c, request b: adding 1 devices exceeds the claim limit of 32, with 32 already accounted for"; errString(err) != want {
		t.Errorf("got %q, want %q", errString(err), want)
	}
	c := at.Claim("c").Request(at.Request("a", "any")).Obj()
	c.Spec.Devices.Requests[0].Exactly.AllocationMode = "future-mode"
	if _, err := e.run(t, node1, c); !strings.Contains(errString(err), "unsupported count mode future-mode") {
		t.Errorf("got %v, want the mode unquoted as upstream prints it", err)
	}
	dup := []*api.ResourceSlice{
		at.Slice("s1").Node("node-1").Count(2).Device(at.Device("x")).Obj(),
		at.Slice("s2").Node("node-1").Count(2).Device(at.Device("x")).Obj(),
	}
	e = &env{slices: dup, classes: []*resourcev1.DeviceClass{anyClass}}
	_, err = e.run(t, node1, at.Claim("c").Request(at.Request("a", "any")).Obj())
	if !IsUnfit(err) || !strings.Contains(err.Error(), "invalid resource pools were encountered (driver.example.com/pool)") {
		t.Errorf("got %v, want unfit naming the invalid pool in upstream's words", err)
	}
}
