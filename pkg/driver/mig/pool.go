package mig

import (
	"crypto/sha256"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
)

// Node is one node's GPUs, published as one pool named after the node,
// as the NVIDIA DRA driver does.
type Node struct {
	Driver            string
	Node              string
	Model             *GPUModel
	GPUs              int
	DriverVersion     string // a semantic version, e.g. "550.54.15"
	CUDADriverVersion string
	// GPUsPerSlice bounds the GPUs whose devices share a slice; zero means
	// as many as the per-slice device limit of the form allows.
	GPUsPerSlice int
	// Discovered, when set, are the node's GPUs as the hardware reports
	// them (UUIDs, models that may differ, MIG mode); Model and GPUs are
	// then ignored. Without it the node has GPUs GPUs of Model, MIG on,
	// with UUIDs derived from the node's name.
	Discovered []GPU
}

// GPU is one GPU of a node.
type GPU struct {
	Index int
	UUID  string
	Model *GPUModel
	// MIG is whether MIG mode is on. A GPU with MIG off is published as
	// one whole device with its memory as only capacity and no counter
	// set: there is nothing to partition.
	MIG bool
}

// GPUUUID is the UUID of one GPU: the discovered one, or one derived from
// node and index so that regenerating the examples does not change it.
func (n *Node) GPUUUID(gpu int) string {
	for _, g := range n.Discovered {
		if g.Index == gpu {
			return g.UUID
		}
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", n.Driver, n.Node, gpu))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// GPUList is the node's GPUs in index order.
func (n *Node) GPUList() []GPU {
	if n.Discovered != nil {
		return n.Discovered
	}
	out := make([]GPU, n.GPUs)
	for i := range out {
		out[i] = GPU{Index: i, UUID: n.GPUUUID(i), Model: n.Model, MIG: true}
	}
	return out
}

// memorySlices is the consumption of the slices [start, start+n).
func memorySlices(start, n int) counterMixin {
	c := counters{}
	for i := start; i < start+n; i++ {
		c[MemorySliceCounter(i)] = api.Counter{Value: count(1)}
	}
	name := fmt.Sprintf("memory-slices-%d-%d", start, start+n-1)
	if n == 1 {
		name = fmt.Sprintf("memory-slice-%d", start)
	}
	return counterMixin{name: name, counters: c}
}

// devices lists one GPU's devices in the order of Partitions.
func (n *Node) devices(g GPU) []device {
	m, gpu := g.Model, g.Index
	brand := m.Brand
	if brand == "" {
		brand = "Nvidia"
	}
	common := deviceMixin{
		name: "common",
		attributes: attributes{
			"productName":           str(m.ProductName),
			"brand":                 str(brand),
			"architecture":          str(m.Architecture),
			"cudaComputeCapability": version(m.ComputeCapability),
			"driverVersion":         version(n.DriverVersion),
			"cudaDriverVersion":     version(n.CUDADriverVersion),
		},
	}
	// MIG devices are created only when allocated (KEP-4815), so they have
	// no UUID of their own yet; parentUUID is what claims match on.
	parent := deviceMixin{
		name: fmt.Sprintf("gpu-%d-parent", gpu),
		attributes: attributes{
			"parentUUID":  str(g.UUID),
			"parentIndex": integer(gpu),
		},
	}
	set := CounterSetName(gpu)
	if !g.MIG {
		return []device{{
			name:     GPUDeviceName(gpu),
			includes: []deviceMixin{common, {name: "whole-gpu-mig-off", attributes: attributes{"type": str("gpu")}}},
			attributes: attributes{
				"uuid":  str(g.UUID),
				"index": integer(gpu),
			},
			capacity: capacities{"memory": {Value: quantity(m.Whole.Memory)}},
		}}
	}
	var out []device
	for _, part := range m.Partitions(gpu) {
		if part.Whole() {
			whole := deviceMixin{
				name:       "whole-gpu",
				attributes: attributes{"type": str("gpu")},
				capacity:   m.Whole.Capacity(),
			}
			out = append(out, device{
				name:     part.DeviceName(),
				includes: []deviceMixin{common, whole},
				attributes: attributes{
					"uuid":  str(g.UUID),
					"index": integer(gpu),
				},
				counterSet: set,
				consumes: []counterMixin{
					{name: "whole-gpu", counters: m.Shared.Counters()},
					memorySlices(0, m.MemorySlices),
				},
			})
			continue
		}
		p := part.Profile
		label := "mig-" + ProfileLabel(p.Name)
		profile := deviceMixin{
			name: label,
			attributes: attributes{
				"type":          str("mig"),
				"profile":       str(p.Name),
				"placementSize": integer(p.MemorySlices),
			},
			capacity: p.Capacity(),
		}
		out = append(out, device{
			name:       part.DeviceName(),
			includes:   []deviceMixin{common, parent, profile},
			attributes: attributes{"placementStart": integer(part.Start)},
			counterSet: set,
			consumes:   []counterMixin{{name: label, counters: p.Counters()}, memorySlices(part.Start, p.MemorySlices)},
		})
	}
	return out
}

// counterSet is one GPU's counter set; in mixin form every GPU includes the
// model's counter-set mixin.
func (n *Node) counterSet(g GPU) counterSet {
	return counterSet{name: CounterSetName(g.Index), includes: []counterMixin{{name: g.Model.Name, counters: g.Model.SharedCounters()}}}
}

// Slices returns the node's pool: the counter sets in slices of their own
// (KEP-4815 allows sharedCounters or devices per slice, never both), then
// the devices, GPU by GPU, as few GPUs per slice as the limits of the form
// require. Both forms yield the same slice names, devices and counter sets
// once flattened.
func (n *Node) Slices(form Form) []*api.ResourceSlice {
	// Every device consumes counters: a plain v1 slice holds at most
	// MaxDevicesWithAdvancedFeatures of them (KEP-4815 "Limits"); with
	// mixins the limit is on all devices (KEP-5234 "Limits").
	// examples/examples_test.go validates every generated slice, flat and
	// flattened, against all of pkg/core/validation's rules.
	maxDevices, maxSets := validation.MaxDevicesWithAdvancedFeatures, validation.MaxCounterSets
	if form == Mixins {
		maxDevices, maxSets = validation.MixinMaxDevices, validation.MixinMaxCounterSets
	}
	gpus := n.GPUList()
	perGPU := make([][]device, len(gpus))
	var migGPUs []GPU
	for i, g := range gpus {
		perGPU[i] = n.devices(g)
		if g.MIG {
			migGPUs = append(migGPUs, g)
		}
	}

	var out []*api.ResourceSlice
	newSlice := func(name string) *api.ResourceSlice {
		s := &api.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: api.ResourceSliceSpec{
				Driver:   n.Driver,
				Pool:     api.ResourcePool{Name: n.Node, Generation: 1},
				NodeName: ptr.To(n.Node),
			},
		}
		out = append(out, s)
		return s
	}
	for first := 0; first < len(migGPUs); first += maxSets {
		group := migGPUs[first:min(first+maxSets, len(migGPUs))]
		name := n.Node + "-counters"
		if len(migGPUs) > maxSets {
			name += gpuRange(group[0].Index, group[len(group)-1].Index)
		}
		s := newSlice(name)
		mc := newMixinCollector()
		sets := make([]counterSet, len(group))
		for i, g := range group {
			sets[i] = n.counterSet(g)
		}
		s.Spec.SharedCounters = writeCounterSets(sets, form, mc)
		s.Spec.Mixins = mc.result()
	}
	// GPUs share a device slice while their devices fit (and at most
	// GPUsPerSlice of them); a GPU's devices are never split.
	for first := 0; first < len(gpus); {
		last, count := first, len(perGPU[first])
		for last+1 < len(gpus) && count+len(perGPU[last+1]) <= maxDevices &&
			(n.GPUsPerSlice == 0 || last+1-first < n.GPUsPerSlice) {
			last++
			count += len(perGPU[last])
		}
		s := newSlice(n.Node + gpuRange(gpus[first].Index, gpus[last].Index))
		mc := newMixinCollector()
		var devs []device
		for i := first; i <= last; i++ {
			devs = append(devs, perGPU[i]...)
		}
		s.Spec.Devices = writeDevices(devs, form, mc)
		s.Spec.Mixins = mc.result()
		first = last + 1
	}
	for _, s := range out {
		s.Spec.Pool.ResourceSliceCount = int64(len(out))
	}
	return out
}

func gpuRange(first, last int) string {
	if first == last {
		return fmt.Sprintf("-gpu-%d", first)
	}
	return fmt.Sprintf("-gpu-%d-%d", first, last)
}
