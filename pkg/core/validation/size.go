package validation

import (
	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dractl/dractl/pkg/core/api"
)

// EtcdMaxObjectBytes is etcd's default bound on one stored value
// (--max-request-bytes, 1.5 MiB). kube-apiserver stores a ResourceSlice as
// one value, so this, not the 3 MiB request body, is what a slice must
// fit; KEP-4815 and KEP-5234 size their limits so that the largest slice
// they allow does (docs/upstream.md shows what the largest measures).
const EtcdMaxObjectBytes = 3 << 19

// SizeWarningBytes is the stored size from which ResourceSliceWarnings
// warns: a tenth below the bound, where a slice has fields that no
// per-slice limit bounds (labels, annotations, node selectors) far above
// what the limits' worst case needs.
const SizeWarningBytes = EtcdMaxObjectBytes / 10 * 9

// StoredSize is the size of the value kube-apiserver writes to etcd for
// the slice, without encryption at rest: resource.k8s.io/v1 protobuf in
// its envelope (the 4-byte magic and a runtime.Unknown naming the kind).
// The types this build knows have no protobuf for KEP-5234's fields; a
// slice that uses them is measured as a server that serves them encodes
// it: mixins with the messages of the fields they stand for (a device
// mixin as a Device of its name, attributes and capacities, a consumption
// mixin as a DeviceCounterConsumption, a counter set mixin as a
// CounterSet), includes as repeated strings, each field with a one-byte
// tag.
func StoredSize(s *api.ResourceSlice) int {
	v1, err := api.ToUpstream(plain(s))
	if err != nil {
		return 0
	}
	spec := v1.Spec
	spec.Devices, spec.SharedCounters = nil, nil
	n := spec.Size()
	for i := range v1.Spec.Devices {
		n += pbField(deviceSize(&v1.Spec.Devices[i], &s.Spec.Devices[i]))
	}
	for i := range v1.Spec.SharedCounters {
		n += pbField(v1.Spec.SharedCounters[i].Size() + pbStrings(s.Spec.SharedCounters[i].Includes))
	}
	if m := s.Spec.Mixins; m != nil {
		k := 0
		for _, d := range m.Device {
			k += pbField((&resourcev1.Device{Name: d.Name, Attributes: d.Attributes, Capacity: d.Capacity}).Size())
		}
		for _, c := range m.DeviceCounterConsumption {
			k += pbField((&resourcev1.DeviceCounterConsumption{CounterSet: c.Name, Counters: c.Counters}).Size())
		}
		for _, c := range m.CounterSet {
			k += pbField((&resourcev1.CounterSet{Name: c.Name, Counters: c.Counters}).Size())
		}
		n += pbField(k)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
		Raw: make([]byte, pbField(v1.ObjectMeta.Size())+pbField(n))}
	return len(protobufMagic) + u.Size()
}

// deviceSize is the encoded size of a device: d as v1 holds it, and the
// includes of own (the device as written) and of its consumptions.
func deviceSize(d *resourcev1.Device, own *api.Device) int {
	cons := d.ConsumesCounters
	c := *d
	c.ConsumesCounters = nil
	n := c.Size() + pbStrings(own.Includes)
	for j := range cons {
		n += pbField(cons[j].Size() + pbStrings(own.ConsumesCounters[j].Includes))
	}
	return n
}

// plain is s without its mixins and includes: what v1 can encode of it.
func plain(s *api.ResourceSlice) *api.ResourceSlice {
	if !s.UsesMixins() {
		return s
	}
	c := s.DeepCopy()
	c.Spec.Mixins = nil
	for i := range c.Spec.Devices {
		c.Spec.Devices[i].Includes = nil
		for j := range c.Spec.Devices[i].ConsumesCounters {
			c.Spec.Devices[i].ConsumesCounters[j].Includes = nil
		}
	}
	for i := range c.Spec.SharedCounters {
		c.Spec.SharedCounters[i].Includes = nil
	}
	return c
}

// field is the size of a length-delimited field of n bytes.
func pbField(n int) int { return 1 + protowire.SizeBytes(n) }

func pbStrings(ss []string) int {
	n := 0
	for _, s := range ss {
		n += pbField(len(s))
	}
	return n
}

// protobufMagic prefixes every protobuf value kube-apiserver stores.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}
