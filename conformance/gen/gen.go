// Package gen generates random, reproducible DRA scenarios for differential
// testing against the upstream allocator, and shrinks failing ones.
package gen

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/conformance/scenario"
	"github.com/dractl/dractl/conformance/upstream"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/driver/mig"
)

type generator struct {
	r        *rand.Rand
	s        *scenario.Scenario
	families []string // request families with devices in this scenario
	mixins   bool
}

// Generate returns scenario number index of the given seed. The same
// (seed, index) always yields the same scenario.
func Generate(seed int64, index int) *scenario.Scenario {
	g := &generator{
		r: rand.New(rand.NewPCG(uint64(seed), uint64(index))),
		s: &scenario.Scenario{Name: fmt.Sprintf("seed%d-%d", seed, index)},
	}
	g.mixins = g.r.IntN(3) == 0
	g.nodes()
	g.pools()
	g.perturb()
	g.classes()
	g.allocated()
	n := 1 + g.r.IntN(2)
	if g.p(0.15) {
		n = 3
	}
	for i := 0; i < n; i++ {
		g.s.Claims = append(g.s.Claims, g.claim(fmt.Sprintf("claim-%d", i), 3))
	}
	return g.s
}

func (g *generator) p(prob float64) bool { return g.r.Float64() < prob }
func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func (g *generator) nodes() {
	n := 1 + g.r.IntN(3)
	for i := 0; i < n; i++ {
		g.s.Nodes = append(g.s.Nodes, Node(fmt.Sprintf("node-%d", i), map[string]string{
			"rack": fmt.Sprintf("r%d", i%2), "block": fmt.Sprintf("b%d", i/2),
		}))
	}
}

func (g *generator) addFamily(f ...string) {
	for _, x := range f {
		if !slices.Contains(g.families, x) {
			g.families = append(g.families, x)
		}
	}
}

func (g *generator) pools() {
	for len(g.s.Slices) == 0 {
		if g.p(0.6) {
			for _, n := range g.s.Nodes {
				if !g.p(0.75) {
					continue
				}
				var profs []*mig.Profile
				for _, p := range Profiles {
					if g.p(0.4) {
						profs = append(profs, p)
					}
				}
				g.s.Slices = append(g.s.Slices, MIGPool(n.Name, 1+g.r.IntN(2), profs, 1+g.r.IntN(2), g.mixins)...)
				g.addFamily("gpu", "gpu-full")
				if len(profs) > 0 {
					g.addFamily("mig")
				}
			}
		}
		if g.p(0.3) {
			for _, n := range g.s.Nodes {
				if g.p(0.7) {
					g.accPool(n.Name)
				}
			}
		}
		if g.p(0.45) {
			g.nicPool()
		}
		if g.p(0.3) {
			g.tpuPool()
		}
		if g.p(0.5) {
			for _, n := range g.s.Nodes {
				if g.p(0.7) {
					g.plainPool(n)
				}
			}
		}
	}
	g.addFamily("any")
}

// accPool: random counter shapes, counter sets in their own slice.
func (g *generator) accPool(node string) {
	pool := "acc-" + node
	cs := Slice(pool+"-a", AccDriver, pool, 2)
	cs.Spec.NodeName = ptr.To(node)
	ds := Slice(pool+"-b", AccDriver, pool, 2)
	ds.Spec.NodeName = ptr.To(node)
	if g.p(0.5) { // counter slice sorts last
		cs.Name, ds.Name = ds.Name, cs.Name
	}
	names := []string{"a", "b", "c"}
	nSets := 1 + g.r.IntN(2)
	for i := 0; i < nSets; i++ {
		set := api.CounterSet{Name: fmt.Sprintf("set-%d", i), Counters: map[string]api.Counter{}}
		for _, n := range names[:1+g.r.IntN(3)] {
			set.Counters[n] = api.Counter{Value: *resource.NewQuantity(int64(2+g.r.IntN(7)), resource.DecimalSI)}
		}
		cs.Spec.SharedCounters = append(cs.Spec.SharedCounters, set)
	}
	nDev := 3 + g.r.IntN(6)
	for j := 0; j < nDev; j++ {
		d := api.Device{Name: fmt.Sprintf("acc-%d", j), Attributes: map[api.QualifiedName]api.DeviceAttribute{"index": iattr(j)}}
		for _, si := range g.r.Perm(nSets)[:1+g.r.IntN(nSets)] {
			set := cs.Spec.SharedCounters[si]
			c := api.DeviceCounterConsumption{CounterSet: set.Name, Counters: map[string]api.Counter{}}
			for _, n := range slices.Sorted(maps.Keys(set.Counters)) {
				if g.p(0.7) {
					c.Counters[n] = api.Counter{Value: *resource.NewQuantity(int64(1+g.r.IntN(4)), resource.DecimalSI)}
				}
			}
			d.Attributes["parent"] = sattr(set.Name)
			d.ConsumesCounters = append(d.ConsumesCounters, c)
		}
		ds.Spec.Devices = append(ds.Spec.Devices, d)
	}
	g.s.Slices = append(g.s.Slices, cs, ds)
	g.addFamily("acc")
}

func (g *generator) taint(d *api.Device) {
	if g.p(0.2) {
		d.Taints = append(d.Taints, api.DeviceTaint{
			Key: pick(g.r, []string{"maintenance", "degraded"}), Value: "true",
			Effect: pick(g.r, []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute}),
		})
	}
}

// nicPool: network-attached devices with per-device node selection, taints,
// consumable capacity and allowMultipleAllocations.
func (g *generator) nicPool() {
	nSlices := 1 + g.r.IntN(2)
	for k := 0; k < nSlices; k++ {
		s := Slice(fmt.Sprintf("nic-%d", k), NICDriver, "nic-net", int64(nSlices))
		s.Spec.PerDeviceNodeSelection = ptr.To(true)
		nDev := 1 + g.r.IntN(4)
		for j := 0; j < nDev; j++ {
			rack := fmt.Sprintf("r%d", g.r.IntN(2))
			d := api.Device{
				Name:       fmt.Sprintf("nic-%d-%d", k, j),
				Attributes: map[api.QualifiedName]api.DeviceAttribute{"rack": sattr(rack), "speed": iattr(pick(g.r, []int{10, 25, 100}))},
				Capacity:   map[api.QualifiedName]api.DeviceCapacity{"bandwidth": {Value: q("100")}},
			}
			switch g.r.IntN(3) {
			case 0:
				d.NodeName = ptr.To(pick(g.r, g.s.Nodes).Name)
			case 1:
				d.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{rack}}}}}}
			default:
				d.AllNodes = ptr.To(true)
			}
			if g.p(0.4) {
				d.AllowMultipleAllocations = ptr.To(true)
				c := d.Capacity["bandwidth"]
				switch g.r.IntN(3) {
				case 0:
					c.RequestPolicy = &resourcev1.CapacityRequestPolicy{Default: qp("10"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("10"), Step: qp("10")}}
				case 1:
					c.RequestPolicy = &resourcev1.CapacityRequestPolicy{Default: qp("25"), ValidValues: []resource.Quantity{q("25"), q("50"), q("100")}}
				}
				d.Capacity["bandwidth"] = c
			}
			g.taint(&d)
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
		g.s.Slices = append(g.s.Slices, s)
	}
	g.addFamily("nic")
}

// tpuPool: a multi-host pool per block: per-host chips counters, single-
// and multi-host devices with per-device node selection.
func (g *generator) tpuPool() {
	blocks := map[string][]string{}
	var order []string
	for _, n := range g.s.Nodes {
		b := n.Labels["block"]
		if _, ok := blocks[b]; !ok {
			order = append(order, b)
		}
		blocks[b] = append(blocks[b], n.Name)
	}
	b := pick(g.r, order)
	hosts := blocks[b]
	pool := "tpu-" + b
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: "block", Operator: corev1.NodeSelectorOpIn, Values: []string{b}}}}}}
	cs := Slice(pool+"-counters", TPUDriver, pool, 2)
	cs.Spec.NodeSelector = sel
	ds := Slice(pool+"-devices", TPUDriver, pool, 2)
	ds.Spec.PerDeviceNodeSelection = ptr.To(true)
	chips := 4
	for _, h := range hosts {
		cs.Spec.SharedCounters = append(cs.Spec.SharedCounters, api.CounterSet{Name: "host-" + h, Counters: counters("chips", chips)})
	}
	attrs := func(topo string) map[api.QualifiedName]api.DeviceAttribute {
		return map[api.QualifiedName]api.DeviceAttribute{"block": sattr(b), "topology": sattr(topo)}
	}
	if len(hosts) > 1 && g.p(0.7) {
		d := api.Device{Name: "tpu-" + b + "-2x4", Attributes: attrs("2x4"), NodeSelector: sel}
		for _, h := range hosts {
			d.ConsumesCounters = append(d.ConsumesCounters, api.DeviceCounterConsumption{CounterSet: "host-" + h, Counters: counters("chips", chips)})
		}
		ds.Spec.Devices = append(ds.Spec.Devices, d)
	}
	for _, h := range hosts {
		ds.Spec.Devices = append(ds.Spec.Devices, api.Device{Name: "tpu-" + h + "-2x2", Attributes: attrs("2x2"), NodeName: ptr.To(h),
			ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "host-" + h, Counters: counters("chips", 4)}}})
		for c := 0; c < chips; c++ {
			d := api.Device{Name: fmt.Sprintf("tpu-%s-1x1-%d", h, c), Attributes: attrs("1x1"), NodeName: ptr.To(h),
				ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "host-" + h, Counters: counters("chips", 1)}}}
			g.taint(&d)
			ds.Spec.Devices = append(ds.Spec.Devices, d)
		}
	}
	if g.p(0.5) {
		slices.Reverse(ds.Spec.Devices)
	}
	g.s.Slices = append(g.s.Slices, cs, ds)
	g.addFamily("tpu")
}

// plainPool: node-local or node-selected devices split over slices.
func (g *generator) plainPool(node *corev1.Node) {
	pool := "plain-" + node.Name
	nSlices := 1 + g.r.IntN(3)
	for k := 0; k < nSlices; k++ {
		s := Slice(fmt.Sprintf("%s-%d", pool, k), PlainDriver, pool, int64(nSlices))
		if g.p(0.2) {
			s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node.Name}}}}}}
		} else {
			s.Spec.NodeName = ptr.To(node.Name)
		}
		nDev := 1 + g.r.IntN(5)
		for j := 0; j < nDev; j++ {
			d := api.Device{Name: fmt.Sprintf("dev-%d-%d", k, j), Attributes: map[api.QualifiedName]api.DeviceAttribute{
				"color": sattr(pick(g.r, []string{"red", "green", "blue"})), "index": iattr(j), "fast": battr(g.p(0.5)),
			}}
			if g.mixins && g.p(0.5) {
				if s.Spec.Mixins == nil {
					s.Spec.Mixins = &api.ResourceSliceMixins{Device: []api.DeviceMixin{
						{Name: "base", Attributes: map[api.QualifiedName]api.DeviceAttribute{"color": sattr("black"), "vendor": sattr("acme")}},
						{Name: "fast", Attributes: map[api.QualifiedName]api.DeviceAttribute{"fast": battr(true), "vendor": sattr("zoom")}},
					}}
				}
				d.Includes = []string{"base"}
				if g.p(0.5) {
					d.Includes = append(d.Includes, "fast")
					delete(d.Attributes, "fast")
				}
				if g.p(0.5) {
					delete(d.Attributes, "color")
				}
			}
			g.taint(&d)
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
		g.s.Slices = append(g.s.Slices, s)
	}
	g.addFamily("plain")
}

// perturb makes some pools incomplete, invalid or gives them obsolete
// slices.
func (g *generator) perturb() {
	pools := map[string][]int{}
	var names []string
	for i, s := range g.s.Slices {
		if _, ok := pools[s.Spec.Pool.Name]; !ok {
			names = append(names, s.Spec.Pool.Name)
		}
		pools[s.Spec.Pool.Name] = append(pools[s.Spec.Pool.Name], i)
	}
	drop := -1
	if g.p(0.08) { // incomplete: drop a slice
		idx := pools[pick(g.r, names)]
		if len(idx) > 1 {
			drop = pick(g.r, idx)
		}
	}
	if g.p(0.04) { // incomplete: one slice more declared than published
		for _, i := range pools[pick(g.r, names)] {
			g.s.Slices[i].Spec.Pool.ResourceSliceCount++
		}
	}
	if g.p(0.08) { // invalid pool
		idx := pools[pick(g.r, names)]
		s := g.s.Slices[pick(g.r, idx)]
		var devs []int
		for i := range s.Spec.Devices {
			devs = append(devs, i)
		}
		if len(devs) > 0 {
			d := &s.Spec.Devices[pick(g.r, devs)]
			switch g.r.IntN(3) {
			case 0: // duplicate device name in the pool
				other := g.s.Slices[pick(g.r, idx)]
				if len(other.Spec.Devices) > 0 && &other.Spec.Devices[0] != d {
					d.Name = other.Spec.Devices[0].Name
				}
			case 1:
				d.ConsumesCounters = append(d.ConsumesCounters, api.DeviceCounterConsumption{CounterSet: "no-such-set", Counters: counters("x", 1)})
			case 2:
				if len(d.ConsumesCounters) > 0 {
					d.ConsumesCounters[0].Counters = counters("no-such-counter", 1)
				}
			}
		}
	}
	if g.p(0.06) { // obsolete generation with different contents
		s := g.s.Slices[pick(g.r, pools[pick(g.r, names)])].DeepCopy()
		s.Name += "-old"
		s.Spec.Pool.Generation = 0
		for i := range s.Spec.Devices {
			s.Spec.Devices[i].Name += "-old"
		}
		g.s.Slices = append(g.s.Slices, s)
	}
	if drop >= 0 {
		g.s.Slices = slices.Delete(g.s.Slices, drop, drop+1)
	}
	if g.p(0.5) {
		g.r.Shuffle(len(g.s.Slices), func(i, j int) { g.s.Slices[i], g.s.Slices[j] = g.s.Slices[j], g.s.Slices[i] })
	}
}

func (g *generator) classes() {
	g.s.Classes = []*resourcev1.DeviceClass{
		coretest.Class("gpu", DriverIs(GPUDriver)),
		coretest.Class("gpu-full", DriverIs(GPUDriver), AttrIs(GPUDriver, "type", "gpu")),
		coretest.Class("mig", DriverIs(GPUDriver)+" && "+AttrIs(GPUDriver, "type", "mig")),
		coretest.Class("acc", DriverIs(AccDriver)),
		coretest.Class("nic", DriverIs(NICDriver)),
		coretest.Class("tpu", DriverIs(TPUDriver)),
		coretest.Class("plain", DriverIs(PlainDriver)),
		coretest.Class("any"),
		// Fails at run time on devices without the attribute: fatal.
		coretest.Class("broken", `device.attributes["plain.example.com"].nosuch == "x"`),
	}
}

// selectors per family; each is safe on every device of the family.
var familySelectors = map[string][]string{
	"gpu":      {AttrIs(GPUDriver, "profile", "full"), AttrIs(GPUDriver, "profile", "1g.10gb"), `device.attributes["gpu.example.com"].index < 1`, `device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0`},
	"gpu-full": {`device.attributes["gpu.example.com"].index >= 1`},
	"mig":      {AttrIs(GPUDriver, "profile", "1g.10gb"), AttrIs(GPUDriver, "profile", "2g.20gb"), `device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) < 0`, AttrIs(GPUDriver, "model", "H100")},
	"acc":      {`device.attributes["acc.example.com"].index % 2 == 0`, AttrIs(AccDriver, "parent", "set-0")},
	"nic":      {AttrIs(NICDriver, "rack", "r0"), `device.attributes["nic.example.com"].speed >= 25`, `device.allowMultipleAllocations == true`},
	"tpu":      {AttrIs(TPUDriver, "topology", "1x1"), AttrIs(TPUDriver, "topology", "2x4")},
	"plain":    {AttrIs(PlainDriver, "color", "red"), `device.attributes["plain.example.com"].fast`, `device.attributes["plain.example.com"].index > 0`},
	"any":      {`device.driver != "tpu.example.com"`},
}

var familyAttr = map[string][]string{
	"gpu": {"gpu.example.com/parent", "gpu.example.com/model"}, "gpu-full": {"gpu.example.com/parent", "gpu.example.com/model"},
	"mig": {"gpu.example.com/parent", "gpu.example.com/profile"}, "acc": {"acc.example.com/parent"},
	"nic": {"nic.example.com/rack"}, "tpu": {"tpu.example.com/block", "tpu.example.com/topology"},
	"plain": {"plain.example.com/color", "plain.example.com/fast"}, "any": {"gpu.example.com/parent"},
}

func (g *generator) tolerations() []resourcev1.DeviceToleration {
	if !g.p(0.3) {
		return nil
	}
	switch g.r.IntN(3) {
	case 0:
		return []resourcev1.DeviceToleration{{Operator: resourcev1.DeviceTolerationOpExists}}
	case 1:
		return []resourcev1.DeviceToleration{{Key: "maintenance", Operator: resourcev1.DeviceTolerationOpExists}}
	default:
		return []resourcev1.DeviceToleration{{Key: "degraded", Operator: resourcev1.DeviceTolerationOpEqual, Value: "true", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	}
}

// exact fills an ExactDeviceRequest-like set of fields for a family.
func (g *generator) exact(family string) (class string, sels []resourcev1.DeviceSelector, mode resourcev1.DeviceAllocationMode, count int64, admin *bool, tol []resourcev1.DeviceToleration, capReq *resourcev1.CapacityRequirements) {
	class = family
	switch {
	case g.p(0.004):
		class = "broken"
	case g.p(0.004):
		class = "no-such-class"
	}
	if g.p(0.4) {
		sels = append(sels, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: pick(g.r, familySelectors[family])}})
	}
	mode, count = resourcev1.DeviceAllocationModeExactCount, int64(pick(g.r, []int{1, 1, 1, 2, 2, 3}))
	if g.p(0.06) {
		mode, count = resourcev1.DeviceAllocationModeAll, 0
	}
	if g.p(0.06) {
		admin = ptr.To(true)
	}
	tol = g.tolerations()
	if family == "nic" && g.p(0.5) {
		capReq = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": q(pick(g.r, []string{"5", "10", "20", "30", "60"}))}}
	}
	return
}

func (g *generator) request(name string) (resourcev1.DeviceRequest, string) {
	fam := pick(g.r, g.families)
	if g.p(0.2) {
		r := resourcev1.DeviceRequest{Name: name}
		n := 2 + g.r.IntN(2)
		for i := 0; i < n; i++ {
			f := pick(g.r, g.families)
			if i == 0 {
				fam = f
			}
			class, sels, mode, count, admin, tol, capReq := g.exact(f)
			_ = admin // admin access is not allowed in subrequests
			r.FirstAvailable = append(r.FirstAvailable, resourcev1.DeviceSubRequest{
				Name: fmt.Sprintf("s%d", i), DeviceClassName: class, Selectors: sels, AllocationMode: mode, Count: count,
				Tolerations: tol, Capacity: capReq,
			})
		}
		return r, fam
	}
	class, sels, mode, count, admin, tol, capReq := g.exact(fam)
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, Selectors: sels, AllocationMode: mode, Count: count, AdminAccess: admin, Tolerations: tol, Capacity: capReq,
	}}, fam
}

func (g *generator) claim(name string, maxReq int) *resourcev1.ResourceClaim {
	c := Claim(name)
	n := 1
	if g.p(0.5) {
		n += g.r.IntN(maxReq)
	}
	var fams []string
	for i := 0; i < n; i++ {
		r, fam := g.request(fmt.Sprintf("req-%d", i))
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, r)
		fams = append(fams, fam)
	}
	for _, kind := range []string{"match", "distinct"} {
		prob := 0.3
		if kind == "distinct" {
			prob = 0.15
		}
		if !g.p(prob) {
			continue
		}
		fam := pick(g.r, fams)
		attr := pick(g.r, familyAttr[fam])
		var reqs []string
		if n > 1 && g.p(0.7) {
			// Usually only the requests of the family that has the attribute.
			for i, f := range fams {
				if f == fam || g.p(0.1) {
					reqs = append(reqs, c.Spec.Devices.Requests[i].Name)
				}
			}
		}
		if kind == "match" {
			MatchAttribute(c, attr, reqs...)
		} else {
			DistinctAttribute(c, attr, reqs...)
		}
	}
	return c
}

// allocated creates claims that are already allocated, consistently: each
// is allocated by upstream on a random node given the previous ones.
func (g *generator) allocated() {
	n := g.r.IntN(4)
	ctx := context.Background()
	for i := 0; i < n; i++ {
		c := g.claim(fmt.Sprintf("allocated-%d", i), 2)
		node := pick(g.r, g.s.Nodes)
		p, err := upstream.Prepare(ctx, upstream.Experimental, g.s)
		if err != nil {
			return
		}
		tctx, cancel := context.WithTimeout(ctx, timeoutAllocated)
		out := p.Allocate(tctx, node, []*resourcev1.ResourceClaim{c})
		cancel()
		if out.Kind != scenario.Fit {
			continue
		}
		c.Status.Allocation = out.Results[0]
		for j := range c.Status.Allocation.Devices.Results {
			if r := &c.Status.Allocation.Devices.Results[j]; r.ShareID != nil {
				// Share IDs are random upstream; fix them for reproducibility.
				r.ShareID = ptr.To(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%04d%08d", i, j)))
			}
		}
		c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod-" + c.Name, UID: "uid-pod-" + c.UID}}
		c.ObjectMeta.CreationTimestamp = metav1.Time{}
		g.s.Allocated = append(g.s.Allocated, c)
	}
}

const timeoutAllocated = 2e9 // 2s
