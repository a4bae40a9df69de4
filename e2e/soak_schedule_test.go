package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// A soak is a history of events, work and faults, drawn from a seed. The
// history is data so that a failing one can be replayed and shrunk.
type soakKind string

// Work: what users and drivers do.
const (
	// opTemplatePod: a pod whose claim comes from the template of a MIG
	// class (Class), on the GPU nodes.
	opTemplatePod soakKind = "template-pod"
	// opClaimPods: a claim of one plain device and Pods pods sharing it.
	opClaimPods soakKind = "claim-pods"
	// opDelete: the pods and the claim of an earlier event's Name.
	opDelete soakKind = "delete"
	// opRepublish: the plain pool of Node in a new generation with Arg
	// devices (some dropped or added back).
	opRepublish soakKind = "republish"
	// opClass: the plain class selects every device (Arg 0) or only the
	// even-indexed ones (Arg 1).
	opClass soakKind = "class"
)

// Faults.
const (
	// faultWrites: the proxy fails Arg per mille of components' writes
	// from now on.
	faultWrites soakKind = "write-faults"
	// faultAPIServer: kube-apiserver restarted.
	faultAPIServer soakKind = "restart-apiserver"
	// faultEtcd: etcd stalls for Arg milliseconds.
	faultEtcd soakKind = "stall-etcd"
	// faultScheduler: a burst of three pods, and the dractl-scheduler
	// leader SIGKILLed the moment the API shows one of their claims
	// allocated (PreBind wrote it, Bind is next: the leader dies while it
	// binds them), or after 5 s; a new replica replaces it.
	faultScheduler soakKind = "kill-scheduler"
	// faultDriver: the driver of Node restarted to kill itself (SIGKILL)
	// at prepare failpoint Arg of the next pod's claim; it is started
	// again once dead, as its DaemonSet would.
	faultDriver soakKind = "kill-driver"
	// faultMonitor: the monitor's leader dies with its Lease held; a new
	// replica replaces it.
	faultMonitor soakKind = "kill-monitor"
	// faultPublisher: the pool publisher's leader SIGKILLed; a new
	// replica replaces it.
	faultPublisher soakKind = "kill-publisher"
)

var soakFaults = []soakKind{faultWrites, faultAPIServer, faultEtcd, faultScheduler, faultDriver, faultMonitor, faultPublisher}

// soakEvent is one step of a soak's history.
type soakEvent struct {
	Kind    soakKind
	Name    string
	Profile string
	Class   string
	Node    string
	Pods    int
	Arg     int
	// Pause is how long the soak lets the cluster work before the next
	// event.
	Pause time.Duration
}

func (e soakEvent) String() string {
	var b strings.Builder
	b.WriteString(string(e.Kind))
	add := func(k string, v any) { fmt.Fprintf(&b, " %s=%v", k, v) }
	if e.Name != "" {
		add("name", e.Name)
	}
	if e.Profile != "" {
		add("profile", e.Profile)
	}
	if e.Class != "" {
		add("class", e.Class)
	}
	if e.Node != "" {
		add("node", e.Node)
	}
	if e.Pods != 0 {
		add("pods", e.Pods)
	}
	if e.Kind != opTemplatePod && e.Kind != opClaimPods && e.Kind != opDelete {
		add("arg", e.Arg)
	}
	add("pause", e.Pause)
	return b.String()
}

// The soak's cluster, which the generator needs to know: its GPU nodes
// (kubelet and driver), its nodes with plain pools (no kubelet), and the
// MIG classes pods ask for (deploy/driver/deviceclasses.yaml).
var (
	soakGPUNodes   = []string{"gpu-0", "gpu-1"}
	soakPlainNodes = []string{"plain-0", "plain-1"}
	soakMIGClasses = []string{"mig-1g-5gb.dractl.dev", "mig-2g-10gb.dractl.dev", "mig-3g-20gb.dractl.dev"}
)

// soakMaxLive bounds the groups of pods alive at once: about what the
// GPUs and plain devices hold. Creations outnumber deletions, so without
// it the cluster fills in the first minutes and stays full, every new pod
// pending: the scheduler would have little to allocate, and a kill of
// its leader would rarely find a binding in flight.
const soakMaxLive = 12

const soakPlainClass = "soak-plain"

// soakGenerator draws a history: rounds in which every fault kind comes
// once, in a random order, each after a few work events, so that even a
// short soak injects every kind.
type soakGenerator struct {
	rng   *rand.Rand
	n     int
	live  []string // names of pod groups created and not deleted
	round []soakKind
	work  int // work events left before the next fault
}

func newSoakGenerator(seed uint64) *soakGenerator {
	return &soakGenerator{rng: rand.New(rand.NewPCG(seed, 0x50a6))}
}

func (g *soakGenerator) next() soakEvent {
	g.n++
	r := g.rng
	e := soakEvent{Pause: time.Duration(100+r.IntN(900)) * time.Millisecond}
	if g.work == 0 {
		if len(g.round) == 0 {
			g.round = slices.Clone(soakFaults)
			r.Shuffle(len(g.round), func(i, j int) { g.round[i], g.round[j] = g.round[j], g.round[i] })
		}
		e.Kind, g.round = g.round[0], g.round[1:]
		g.work = 2 + r.IntN(4)
		switch e.Kind {
		case faultWrites:
			e.Arg = []int{0, 50, 150, 300}[r.IntN(4)]
		case faultEtcd:
			e.Arg = 1000 + r.IntN(7000)
		case faultScheduler:
			e.Name = fmt.Sprintf("burst-%d", g.n)
			e.Profile = g.profile()
			g.live = append(g.live, e.Name)
		case faultDriver:
			e.Node, e.Arg = soakGPUNodes[r.IntN(len(soakGPUNodes))], r.IntN(len(prepare.PrepareFailpoints))
			e.Name, e.Class, e.Profile = fmt.Sprintf("crash-%d", g.n), soakMIGClasses[r.IntN(len(soakMIGClasses))], g.profile()
			g.live = append(g.live, e.Name)
		}
		return e
	}
	g.work--
	switch w := r.IntN(100); {
	case len(g.live) > 0 && (w >= 55 && w < 85 || len(g.live) >= soakMaxLive):
		i := r.IntN(len(g.live))
		e.Kind, e.Name = opDelete, g.live[i]
		g.live = slices.Delete(g.live, i, i+1)
	case w < 30:
		e.Kind, e.Name = opTemplatePod, fmt.Sprintf("t-%d", g.n)
		e.Class, e.Profile = soakMIGClasses[r.IntN(len(soakMIGClasses))], g.profile()
		g.live = append(g.live, e.Name)
	case w < 55:
		e.Kind, e.Name, e.Pods, e.Profile = opClaimPods, fmt.Sprintf("c-%d", g.n), 1+r.IntN(2), g.profile()
		g.live = append(g.live, e.Name)
	case w < 94:
		e.Kind, e.Node, e.Arg = opRepublish, soakPlainNodes[r.IntN(len(soakPlainNodes))], 2+r.IntN(5)
	default:
		e.Kind, e.Arg = opClass, r.IntN(2)
	}
	return e
}

// profile picks the scheduler profile of a pod: both profiles run in the
// same dractl-scheduler, as they do in deploy/scheduler's two-profile
// configuration, and one's allocations must be seen by the other.
func (g *soakGenerator) profile() string {
	if g.rng.IntN(2) == 0 {
		return stockProfile
	}
	return dractlProfile
}

// shrink returns a smallest history it finds, by delta debugging
// (Zeller's ddmin), on which fails still reports a failure: it removes
// chunks of the history, ever smaller, while the failure remains. A
// failure that needs its whole history comes back whole. runs bounds the
// number of calls of fails (each a whole soak), since a failure under
// faults need not reproduce every time; fails is assumed true of history.
func shrink(history []soakEvent, runs int, fails func([]soakEvent) bool) []soakEvent {
	cur := slices.Clone(history)
	n := 2
	for len(cur) >= 2 && runs > 0 {
		chunk := (len(cur) + n - 1) / n
		reduced := false
		for start := 0; start < len(cur) && runs > 0; start += chunk {
			complement := slices.Concat(cur[:start], cur[min(start+chunk, len(cur)):])
			if len(complement) == 0 {
				continue
			}
			runs--
			if fails(complement) {
				cur, n, reduced = complement, max(n-1, 2), true
				break
			}
		}
		if !reduced {
			if n >= len(cur) {
				break
			}
			n = min(2*n, len(cur))
		}
	}
	return cur
}

func formatHistory(h []soakEvent) string {
	var b strings.Builder
	for i, e := range h {
		fmt.Fprintf(&b, "%3d %s\n", i, e)
	}
	return b.String()
}

// TestShrinkFindsMinimalHistory: a failure that needs two particular
// events among many shrinks to exactly those two, in their order, within
// the run budget; one that needs all events keeps them all.
func TestShrinkFindsMinimalHistory(t *testing.T) {
	g := newSoakGenerator(7)
	var h []soakEvent
	for range 60 {
		h = append(h, g.next())
	}
	a, b := h[11], h[47]
	runs := 0
	needs := func(s []soakEvent) bool {
		runs++
		i, j := slices.Index(s, a), slices.Index(s, b)
		return i >= 0 && j > i
	}
	got := shrink(h, 200, needs)
	if !slices.Equal(got, []soakEvent{a, b}) {
		t.Errorf("shrunk to\n%swant events 11 and 47 only", formatHistory(got))
	}
	if runs > 200 {
		t.Errorf("%d runs, budget 200", runs)
	}
	all := func(s []soakEvent) bool { return len(s) == len(h) }
	if got := shrink(h, 500, all); len(got) != len(h) {
		t.Errorf("a failure that needs every event shrank to %d events", len(got))
	}
	// A budget of one run: the history cannot shrink further than one
	// removal.
	if got := shrink(h, 1, func([]soakEvent) bool { return true }); len(got) != len(h)/2 {
		t.Errorf("one run shrank %d events to %d, want %d", len(h), len(got), len(h)/2)
	}
}

// TestSoakScheduleCoversEveryFault: any seed's first round injects every
// fault kind, deletions name only pods created before them, and the
// drivers are killed at every prepare failpoint across seeds. Over a long
// history the groups alive stay within soakMaxLive, but for the one a
// fault may create before the next work event deletes.
func TestSoakScheduleCoversEveryFault(t *testing.T) {
	failpoints := map[int]bool{}
	for seed := range uint64(20) {
		g := newSoakGenerator(seed)
		seen := map[soakKind]bool{}
		created := map[string]bool{}
		for i := 0; i < 6*len(soakFaults); i++ {
			e := g.next()
			seen[e.Kind] = true
			switch e.Kind {
			case opTemplatePod, opClaimPods, faultScheduler, faultDriver:
				created[e.Name] = true
				if e.Kind == faultDriver {
					failpoints[e.Arg] = true
				}
			case opDelete:
				if !created[e.Name] {
					t.Errorf("seed %d: event %d deletes %s, never created", seed, i, e.Name)
				}
			}
		}
		for _, f := range soakFaults {
			if !seen[f] {
				t.Errorf("seed %d: no %s in the first %d events", seed, f, 6*len(soakFaults))
			}
		}
	}
	for i, f := range prepare.PrepareFailpoints {
		if !failpoints[i] {
			t.Errorf("no driver killed at %s in 20 seeds", f)
		}
	}
	if len(failpoints) != len(prepare.PrepareFailpoints) {
		t.Errorf("failpoints drawn %v, want indexes of %v", slices.Sorted(maps.Keys(failpoints)), prepare.PrepareFailpoints)
	}
	for seed := range uint64(20) {
		g := newSoakGenerator(seed)
		most := 0
		for range 2000 {
			g.next()
			most = max(most, len(g.live))
		}
		if most > soakMaxLive+1 || most < soakMaxLive {
			t.Errorf("seed %d: up to %d groups alive in 2000 events, want %d or %d", seed, most, soakMaxLive, soakMaxLive+1)
		}
	}
}

// TestStockWeaknessIsTheStockProfilesOnly: an over-use among claims of
// the stock profile only is reported and taken out of the problems; one
// with a claim of dractl's profile among the holders stays a failure,
// for a device held twice and for a counter set over-used alike.
func TestStockWeaknessIsTheStockProfilesOnly(t *testing.T) {
	// A pool of three devices, each consuming 1 of the set's mem.
	pool := func(mem string) resourcev1.ResourceSlice {
		slice := resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourcev1.ResourceSliceSpec{
			Driver: "d.example.com", Pool: resourcev1.ResourcePool{Name: "p", Generation: 1, ResourceSliceCount: 1},
			SharedCounters: []resourcev1.CounterSet{{Name: "gpu", Counters: map[string]resourcev1.Counter{"mem": {Value: resource.MustParse(mem)}}}},
		}}
		for _, d := range []string{"a", "b", "c"} {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: d, ConsumesCounters: []resourcev1.DeviceCounterConsumption{{
				CounterSet: "gpu", Counters: map[string]resourcev1.Counter{"mem": {Value: resource.MustParse("1")}}}}})
		}
		return slice
	}
	claim := func(name, device, ownerPod string) resourcev1.ResourceClaim {
		c := resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		if ownerPod != "" {
			c.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: ownerPod}}
		}
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "dev", Driver: "d.example.com", Pool: "p", Device: device}}}}
		return c
	}
	profiles := map[string]string{"c-1": stockProfile, "t-2": stockProfile, "c-3": dractlProfile}
	for _, tc := range []struct {
		name      string
		mem       string // the set's counter
		claims    []resourcev1.ResourceClaim
		wantKept  int // problems left
		wantStock int // over-uses recorded as the stock profile's
	}{
		{"device held by two stock claims, one from a template", "1",
			[]resourcev1.ResourceClaim{claim("c-1", "a", ""), claim("t-2-0-dev-x1y2z", "a", "t-2-0")}, 0, 2},
		{"device held by a stock and a dractl claim", "1",
			[]resourcev1.ResourceClaim{claim("c-1", "a", ""), claim("c-3", "a", "")}, 2, 0},
		{"counter set over-used by stock claims", "1",
			[]resourcev1.ResourceClaim{claim("c-1", "a", ""), claim("t-2-0-dev-x1y2z", "b", "t-2-0")}, 0, 1},
		{"counter set over-used with a dractl claim among its consumers", "1",
			[]resourcev1.ResourceClaim{claim("c-1", "a", ""), claim("t-2-0-dev-x1y2z", "b", "t-2-0"), claim("c-3", "c", "")}, 1, 0},
		{"counter set over-used only by a device the stock profile gave out twice", "2",
			[]resourcev1.ResourceClaim{claim("c-1", "a", ""), claim("t-2-0-dev-x1y2z", "a", "t-2-0"), claim("c-3", "b", "")}, 0, 2},
		{"counter set over-used with a device held twice, and beyond it", "1",
			[]resourcev1.ResourceClaim{claim("c-1", "a", ""), claim("t-2-0-dev-x1y2z", "a", "t-2-0"), claim("c-3", "b", "")}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := &framework.Snapshot{Slices: []resourcev1.ResourceSlice{pool(tc.mem)}, Claims: tc.claims}
			problems, err := snap.Check()
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) == 0 {
				t.Fatal("the snapshot has no problem to classify")
			}
			s := &soak{profiles: profiles, res: &soakResult{upstream: map[string]bool{}, upstreamShared: map[string]bool{}, upstreamClaims: map[string]bool{}}}
			kept := s.dropStockWeakness(snap, slices.Clone(problems))
			if len(kept) != tc.wantKept || len(s.res.upstreamShared) != tc.wantStock {
				t.Errorf("from %q kept %q, recorded as stock %v; want %d kept, %d recorded", problems, kept, s.res.upstreamShared, tc.wantKept, tc.wantStock)
			}
		})
	}
}
