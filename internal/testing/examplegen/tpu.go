package examplegen

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

// TPUTopology is one allocatable group of TPUs: the hosts whose chips it
// joins over the inter-chip interconnect.
type TPUTopology struct {
	Name     string
	Topology string
	Hosts    []string
}

// TPUPool is a multi-host TPU pool published by a central controller with
// per-device node selection (KEP-4815 "Defining multi-host devices").
type TPUPool struct {
	Driver          string
	Pool            string
	AcceleratorType string
	ChipsPerHost    int64
	Hosts           []string
	// Topologies are listed smallest first, for first-fit allocation.
	Topologies []TPUTopology
}

// TPU4x4 is the 4x4 block of KEP-4815: hosts 1, 2, 5 and 6 of a 16-host
// node pool, one 4x4, two 2x4 and four 2x2 topologies. KEP-4815 names its
// one counter set three ways (tpu-counter-set, tpu-couner-set, tpu-pool);
// here it is tpu-counter-set throughout.
var TPU4x4 = TPUPool{
	Driver:          "tpu.google.com",
	Pool:            "tpu-pool",
	AcceleratorType: "tpu-v5-lite-podslice",
	ChipsPerHost:    4,
	Hosts:           []string{"node-1", "node-2", "node-5", "node-6"},
	Topologies: []TPUTopology{
		{"tpu-2x2-1", "2x2", []string{"node-1"}},
		{"tpu-2x2-2", "2x2", []string{"node-2"}},
		{"tpu-2x2-3", "2x2", []string{"node-5"}},
		{"tpu-2x2-4", "2x2", []string{"node-6"}},
		{"tpu-2x4-1", "2x4", []string{"node-1", "node-2"}},
		{"tpu-2x4-2", "2x4", []string{"node-5", "node-6"}},
		{"tpu-4x4-1", "4x4", []string{"node-1", "node-2", "node-5", "node-6"}},
	},
}

// TPUCounterSet is the pool's only counter set.
const TPUCounterSet = "tpu-counter-set"

// HostCounter counts the free chips of one host: chips of different hosts
// are not interchangeable, so each host needs its own counter.
func HostCounter(host string) string { return "tpus-" + host }

// Slices returns the pool in flat form: a counter slice and a device slice.
// Both use per-device node selection. The counter slice has no devices and
// so selects no node, which keeps it visible from every node the devices
// are on; a nodeName would hide it from the other hosts and make the pool
// look incomplete there.
func (p *TPUPool) Slices() []*api.ResourceSlice {
	newSlice := func(name string) *api.ResourceSlice {
		return &api.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: api.ResourceSliceSpec{
				Driver:                 p.Driver,
				Pool:                   api.ResourcePool{Name: p.Pool, Generation: 1, ResourceSliceCount: 2},
				PerDeviceNodeSelection: ptr.To(true),
			},
		}
	}
	chips := *resource.NewQuantity(p.ChipsPerHost, resource.DecimalSI)
	hostCounters := func(hosts []string) map[string]api.Counter {
		c := make(map[string]api.Counter, len(hosts))
		for _, h := range hosts {
			c[HostCounter(h)] = api.Counter{Value: chips}
		}
		return c
	}
	counterSlice := newSlice(p.Pool + "-counters")
	counterSlice.Spec.SharedCounters = []api.CounterSet{{Name: TPUCounterSet, Counters: hostCounters(p.Hosts)}}

	deviceSlice := newSlice(p.Pool + "-devices")
	for _, s := range p.Topologies {
		d := api.Device{
			Name: s.Name,
			Attributes: map[api.QualifiedName]api.DeviceAttribute{
				"topology":        {StringValue: ptr.To(s.Topology)},
				"acceleratorType": {StringValue: ptr.To(p.AcceleratorType)},
				"hosts":           {IntValue: ptr.To(int64(len(s.Hosts)))},
			},
			Capacity: map[api.QualifiedName]api.DeviceCapacity{
				"tpus": {Value: *resource.NewQuantity(p.ChipsPerHost*int64(len(s.Hosts)), resource.DecimalSI)},
			},
			ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: TPUCounterSet, Counters: hostCounters(s.Hosts)}},
		}
		if len(s.Hosts) == 1 {
			d.NodeName = ptr.To(s.Hosts[0])
		} else {
			d.NodeSelector = hostnameSelector(s.Hosts)
		}
		deviceSlice.Spec.Devices = append(deviceSlice.Spec.Devices, d)
	}
	return []*api.ResourceSlice{counterSlice, deviceSlice}
}

func hostnameSelector(hosts []string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key:      corev1.LabelHostname,
			Operator: corev1.NodeSelectorOpIn,
			Values:   append([]string(nil), hosts...),
		}},
	}}}
}
