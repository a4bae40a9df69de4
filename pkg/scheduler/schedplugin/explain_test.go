package schedplugin

import (
	"context"
	"errors"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/state"
)

const driver = "gpu.example.com"

// gpuNode publishes KEP-4815's partitioned GPU on node: one 40Gi counter
// set gpu-0-counters, a whole device and four 10Gi partitions, each
// partition also taking its own memory slice counter.
func gpuNode(t *testing.T, st *state.State, node string) {
	t.Helper()
	at.Must(t, st.SetMixinSlice(at.Slice(node+"-counters").Driver(driver).Pool(node).Node(node).Count(2).
		Counters("gpu-0-counters", "memory", "40Gi", "memory-slice-0", "1", "memory-slice-1", "1", "memory-slice-2", "1", "memory-slice-3", "1").Obj()))
	whole := at.Device("gpu-0").Str("model", "A100").
		Consumes("gpu-0-counters", "memory", "40Gi", "memory-slice-0", "1", "memory-slice-1", "1", "memory-slice-2", "1", "memory-slice-3", "1")
	devs := []*at.DeviceBuilder{whole}
	for i := range 4 {
		devs = append(devs, at.Device(at.Name("gpu-0-part", i)).Str("model", "A100").
			Consumes("gpu-0-counters", "memory", "10Gi", at.Name("memory-slice", i), "1"))
	}
	at.Must(t, st.SetMixinSlice(at.Slice(node+"-devices").Driver(driver).Pool(node).Node(node).Count(2).Device(devs...).Obj()))
}

// explain allocates claims on node and returns the allocator's
// explanation of why they do not fit.
func explain(t *testing.T, st *state.State, node string, claims ...*resourcev1.ResourceClaim) *allocator.Explanation {
	t.Helper()
	_, err := st.Snapshot().Cycle(claims, state.CycleOptions{}).Allocate(context.Background(), at.Node(node))
	var unfit *allocator.UnfitError
	if !errors.As(err, &unfit) {
		t.Fatalf("Allocate on %s: %v, want *allocator.UnfitError", node, err)
	}
	return unfit.Explanation
}

func TestVerdicts(t *testing.T) {
	st := state.New(state.Options{})
	gpuNode(t, st, "node-1")
	at.Must(t, st.SetClass(at.Class("gpu", `device.driver == "`+driver+`"`)))
	at.Must(t, st.SetClass(at.Class("tpu", `device.driver == "tpu.example.com"`)))
	// Every partition is taken: the whole GPU's memory-slice counters are
	// gone, and so are the partitions.
	for i := range 4 {
		at.Must(t, st.SetClaim(at.Claim(at.Name("held", i)).Request(at.Request("gpu", "gpu")).
			Allocated(at.Result("gpu", driver, "node-1", at.Name("gpu-0-part", i))).Obj()))
	}
	whole := at.Claim("whole").Request(at.Request("gpu", "gpu").Selector(`device.attributes["` + driver + `"].model == "A100"`)).Obj()
	h100 := at.Claim("h100").Request(at.Request("gpu", "gpu").Selector(`device.attributes["` + driver + `"].model == "H100"`)).Obj()
	tpu := at.Claim("tpu").Request(at.Request("tpu", "tpu")).Obj()
	two := at.Claim("two").Request(at.Request("a", "gpu").Selector(`device.attributes["` + driver + `"].model == "H100"`)).
		Request(at.Request("b", "tpu")).Obj()
	names := map[string]string{"default/whole": "gpu", "default/h100": "big", "default/tpu": "tpu", "default/two": "pair"}

	for _, tc := range []struct {
		name   string
		claims []*resourcev1.ResourceClaim
		want   []string
	}{
		{"counters", []*resourcev1.ResourceClaim{whole}, []string{"claim gpu: counter memory of gpu-0-counters exhausted"}},
		{"selector", []*resourcev1.ResourceClaim{h100}, []string{"claim big: selector matched 0 free devices"}},
		{"class", []*resourcev1.ResourceClaim{tpu}, []string{"claim tpu: device class matched 0 free devices"}},
		{"two requests", []*resourcev1.ResourceClaim{two}, []string{"claim pair: request a: selector matched 0 free devices, request b: device class matched 0 free devices"}},
		{"one of two claims", []*resourcev1.ResourceClaim{h100, tpu}, []string{"claim big: selector matched 0 free devices", "claim tpu: device class matched 0 free devices"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range tc.claims {
				at.Must(t, st.SetClaim(c))
			}
			got := verdictStrings(verdicts(explain(t, st, "node-1", tc.claims...), names))
			if len(got) != len(tc.want) {
				t.Fatalf("verdicts %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("verdict %d: %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestVerdictWhenClaimsFitOnlyAlone(t *testing.T) {
	st := state.New(state.Options{})
	gpuNode(t, st, "node-1")
	at.Must(t, st.SetClass(at.Class("gpu", `device.driver == "`+driver+`"`)))
	// Each wants 30Gi of the 40Gi GPU: either fits, both do not.
	a := at.Claim("a").Request(at.Request("gpu", "gpu").Selector(`device.attributes["` + driver + `"].model == "A100"`).Count(3)).Obj()
	b := at.Claim("b").Request(at.Request("gpu", "gpu").Count(3)).Obj()
	at.Must(t, st.SetClaim(a))
	at.Must(t, st.SetClaim(b))
	got := verdictStrings(verdicts(explain(t, st, "node-1", a, b), map[string]string{"default/a": "a", "default/b": "b"}))
	if len(got) != 1 || got[0] != "claim a, b: "+whyTogether {
		t.Errorf("verdicts %q, want one pod-level verdict", got)
	}
}

func TestHeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    allocator.RequestExplanation
		want string
	}{
		{"no devices at all", allocator.RequestExplanation{Needed: 1}, "no devices"},
		{"enough alone", allocator.RequestExplanation{Needed: 2, Candidates: 3, Rejected: map[allocator.Reason]int{allocator.ReasonConstraint: 3}},
			"enough devices one by one, but no combination satisfies the constraints and shared counters"},
		{"all allocated", allocator.RequestExplanation{Needed: 1, Rejected: map[allocator.Reason]int{allocator.ReasonAllocated: 4}}, "all devices allocated"},
		{"selector on free devices", allocator.RequestExplanation{Needed: 1, Rejected: map[allocator.Reason]int{allocator.ReasonAllocated: 4, allocator.ReasonSelector: 1}}, "selector matched 0 free devices"},
		{"selector", allocator.RequestExplanation{Needed: 2, Candidates: 1, Rejected: map[allocator.Reason]int{allocator.ReasonSelector: 7}}, "selector matched too few devices"},
		{"some free", allocator.RequestExplanation{Needed: 2, Candidates: 1, Rejected: map[allocator.Reason]int{allocator.ReasonAllocated: 4}}, "too few devices free"},
		{"the later check wins", allocator.RequestExplanation{Needed: 1, Rejected: map[allocator.Reason]int{allocator.ReasonTaint: 1, allocator.ReasonNode: 5}}, "device taints not tolerated"},
		{"counters without names", allocator.RequestExplanation{Needed: 1, Rejected: map[allocator.Reason]int{allocator.ReasonCounterExhausted: 2}}, "counters exhausted"},
		{"most named counter", allocator.RequestExplanation{Needed: 1, Rejected: map[allocator.Reason]int{allocator.ReasonCounterExhausted: 3},
			Counters: map[string]int{"gpu-1-counters/memory": 1, "gpu-0-counters/memory": 2}}, "counter memory of gpu-0-counters exhausted"},
		{"taint", allocator.RequestExplanation{Needed: 1, Rejected: map[allocator.Reason]int{allocator.ReasonTaint: 1}}, "device taints not tolerated"},
		{"capacity", allocator.RequestExplanation{Needed: 1, Rejected: map[allocator.Reason]int{allocator.ReasonCapacity: 1}}, "requested capacity does not fit"},
		{"incomplete", allocator.RequestExplanation{Needed: 1, Rejected: map[allocator.Reason]int{allocator.ReasonIncompletePool: 8}}, "pools incomplete (slices missing)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := headline(tc.r); got != tc.want {
				t.Errorf("headline %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	byNode := map[string][]verdict{}
	for i := range 12 {
		byNode[at.Name("gpu-node", i)] = []verdict{{"gpu", "counter memory-slice-3 of gpu-0-counters exhausted"}}
	}
	for i := range 488 {
		byNode[at.Name("cpu-node", i)] = []verdict{{"gpu", "selector matched 0 devices"}, {"nic", "device class matched 0 devices"}}
	}
	byNode["odd"] = []verdict{{"extra", whyElsewhere}}
	got := summary([]string{"nic", "gpu"}, byNode, []string{"pool b is invalid: x", "pool a is invalid: y", "pool b is invalid: x"})
	want := "claim nic: device class matched 0 devices on 488 nodes; " +
		"claim gpu: selector matched 0 devices on 488 nodes; counter memory-slice-3 of gpu-0-counters exhausted on 12 nodes; " +
		"claim extra: " + whyElsewhere + " on 1 node; " +
		"pool a is invalid: y; pool b is invalid: x"
	if got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
}
