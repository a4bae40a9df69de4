package live

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/pkg/core/api"
)

// What `get pools`, pool validation and the pool monitor read of a
// ResourceSlice is its pool, node selection, devices' names, capacities,
// counter consumption and taints, and its counter sets: never a device's
// attributes (those feed CEL selectors, which only allocation evaluates)
// nor managedFields. A DGX H100 MIG device has a dozen attributes, each a
// map entry holding a struct of pointers, which is most of what decoding a
// slice allocates. PoolFields drops both: from the protobuf bytes before
// the generated Unmarshal runs (poolDecoder), or from decoded objects
// (TrimToPool).
//
// What is left is mostly maps of Quantities: a device's capacities and
// the counters it consumes, and each slice's counter sets. On a cluster
// they repeat: every node of a model publishes the same counter sets, and
// the same partition of the same GPU consumes the same counters on every
// node. poolDecoder decodes each distinct encoding of these once and hands
// the same map to every device (or slice) that has it, as it hands out
// device names. The objects of a list are read-only (as an informer's
// are), so sharing them is safe; the generated Unmarshal still decodes
// every distinct value, so what a device holds is exactly what it would
// hold without the sharing.

// Field numbers of k8s.io/api/resource/v1's and k8s.io/apimachinery's
// generated.proto that poolDecoder treats apart.
const (
	fieldSliceMetadata      protowire.Number = 1 // ResourceSlice.metadata
	fieldSliceSpec          protowire.Number = 2 // ResourceSlice.spec
	fieldMetaManagedFields  protowire.Number = 17
	fieldSpecDevices        protowire.Number = 6
	fieldSpecSharedCounters protowire.Number = 8
	fieldDeviceName         protowire.Number = 1
	fieldDeviceAttributes   protowire.Number = 2
	fieldDeviceCapacity     protowire.Number = 3
	fieldDeviceConsumes     protowire.Number = 4
)

// maxShared bounds the values a poolDecoder shares, so that a list of
// slices that share nothing does not keep every value twice.
const maxShared = 1 << 16

// poolDecoder decodes ResourceSlices for pool checks (PoolFields). It is
// not safe for concurrent use: each goroutine that decodes has its own,
// and keeps it from page to page.
type poolDecoder struct {
	// out is the slice being decoded without the fields read apart; those
	// are in names, capacity, consumes and sets, as encoded, and devices
	// says which are whose.
	out, names, capacity, consumes, sets []byte
	devices                              []deviceFields

	sharedNames      map[string]string
	sharedCapacities map[string]map[resourcev1.QualifiedName]resourcev1.DeviceCapacity
	sharedConsumes   map[string][]resourcev1.DeviceCounterConsumption
	sharedSets       map[string][]resourcev1.CounterSet
}

// span is a range of one of poolDecoder's buffers.
type span struct{ from, to int }

func (s span) of(b []byte) []byte { return b[s.from:s.to] }

// deviceFields locate one device's fields read apart: the value of its
// last name field (the one protobuf keeps), and every capacity and
// consumesCounters field, in order.
type deviceFields struct {
	name               span
	hasName            bool
	capacity, consumes span
}

func newPoolDecoder() *poolDecoder {
	return &poolDecoder{
		sharedNames:      map[string]string{},
		sharedCapacities: map[string]map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{},
		sharedConsumes:   map[string][]resourcev1.DeviceCounterConsumption{},
		sharedSets:       map[string][]resourcev1.CounterSet{},
	}
}

// decode decodes one encoded ResourceSlice: without managedFields and
// device attributes, and with its devices' names, capacities and counter
// consumption and its counter sets shared with the slices decoded before
// that encode them the same way. Malformed input is an error.
func (d *poolDecoder) decode(msg []byte) (*resourcev1.ResourceSlice, error) {
	d.out, d.names, d.capacity, d.consumes, d.sets = d.out[:0], d.names[:0], d.capacity[:0], d.consumes[:0], d.sets[:0]
	d.devices = d.devices[:0]
	var err error
	if d.out, err = d.slice(d.out, msg); err != nil {
		return nil, err
	}
	s := new(resourcev1.ResourceSlice)
	// The generated code appends each device: room for all of them
	// saves growing the list.
	if len(d.devices) > 0 {
		s.Spec.Devices = make([]resourcev1.Device, 0, len(d.devices))
	}
	if err := s.Unmarshal(d.out); err != nil {
		return nil, err
	}
	if len(s.Spec.Devices) != len(d.devices) {
		// Cannot happen: every devices field read is one device decoded.
		return nil, fmt.Errorf("%d devices decoded, %d read", len(s.Spec.Devices), len(d.devices))
	}
	for i := range d.devices {
		f := &d.devices[i]
		dev := &s.Spec.Devices[i]
		if f.hasName {
			dev.Name = d.name(f.name.of(d.names))
		}
		if b := f.capacity.of(d.capacity); len(b) > 0 {
			if dev.Capacity, err = sharedValue(d.sharedCapacities, b, deviceCapacity); err != nil {
				return nil, err
			}
		}
		if b := f.consumes.of(d.consumes); len(b) > 0 {
			if dev.ConsumesCounters, err = sharedValue(d.sharedConsumes, b, deviceConsumes); err != nil {
				return nil, err
			}
		}
	}
	if len(d.sets) > 0 {
		if s.Spec.SharedCounters, err = sharedValue(d.sharedSets, d.sets, specCounterSets); err != nil {
			return nil, err
		}
	}
	d.bound()
	return s, nil
}

// bound forgets every value shared so far once there are more than
// maxShared.
func (d *poolDecoder) bound() {
	if len(d.sharedNames)+len(d.sharedCapacities)+len(d.sharedConsumes)+len(d.sharedSets) > maxShared {
		clear(d.sharedNames)
		clear(d.sharedCapacities)
		clear(d.sharedConsumes)
		clear(d.sharedSets)
	}
}

// The look-ups below convert their key to a string only to store it: a
// hit allocates nothing. A miss decodes the fields with the generated
// code, as part of an otherwise empty message of their kind.

func deviceCapacity(d *resourcev1.Device) map[resourcev1.QualifiedName]resourcev1.DeviceCapacity {
	return d.Capacity
}

func deviceConsumes(d *resourcev1.Device) []resourcev1.DeviceCounterConsumption {
	return d.ConsumesCounters
}

func specCounterSets(s *resourcev1.ResourceSliceSpec) []resourcev1.CounterSet {
	return s.SharedCounters
}

func (d *poolDecoder) name(b []byte) string {
	if s, ok := d.sharedNames[string(b)]; ok {
		return s
	}
	s := string(b)
	d.sharedNames[s] = s
	return s
}

func (d *poolDecoder) nameOf(s string) string {
	if shared, ok := d.sharedNames[s]; ok {
		return shared
	}
	d.sharedNames[s] = s
	return s
}

// sharedValue returns the value encoded as b: the one decoded before, or
// else what field reads from b decoded as a message M.
func sharedValue[V, M any, PM interface {
	*M
	Unmarshal([]byte) error
}](table map[string]V, b []byte, field func(*M) V) (V, error) {
	if v, ok := table[string(b)]; ok {
		return v, nil
	}
	var m M
	if err := PM(&m).Unmarshal(b); err != nil {
		var zero V
		return zero, err
	}
	v := field(&m)
	table[string(b)] = v
	return v, nil
}

// slice appends the ResourceSlice msg to out without managedFields and
// with its spec as spec leaves it. Fields that are not of the wire type
// their number has are copied as they are, for the generated Unmarshal to
// report.
func (d *poolDecoder) slice(out, msg []byte) ([]byte, error) {
	return eachField(out, msg, func(out []byte, num protowire.Number, message bool, field, value []byte) ([]byte, error) {
		switch {
		case message && num == fieldSliceMetadata:
			return nested(out, num, value, func(out []byte) ([]byte, error) {
				return eachField(out, value, func(out []byte, num protowire.Number, _ bool, field, _ []byte) ([]byte, error) {
					if num == fieldMetaManagedFields && !namesUnreadFields(field) {
						return out, nil
					}
					return append(out, field...), nil
				})
			})
		case message && num == fieldSliceSpec:
			return nested(out, num, value, func(out []byte) ([]byte, error) { return d.spec(out, value) })
		}
		return append(out, field...), nil
	})
}

// spec appends a ResourceSliceSpec without its counter sets, which go to
// d.sets, and with each device as device leaves it.
func (d *poolDecoder) spec(out, msg []byte) ([]byte, error) {
	return eachField(out, msg, func(out []byte, num protowire.Number, message bool, field, value []byte) ([]byte, error) {
		switch {
		case message && num == fieldSpecSharedCounters:
			d.sets = append(d.sets, field...)
			return out, nil
		case message && num == fieldSpecDevices:
			return nested(out, num, value, func(out []byte) ([]byte, error) { return d.device(out, value) })
		}
		return append(out, field...), nil
	})
}

// device appends a Device without its attributes (dropped) and without its
// name, capacities and counter consumption, which go to d.names,
// d.capacity and d.consumes. A device's fields are read one after the
// other, so each kind of them is contiguous in its buffer.
func (d *poolDecoder) device(out, msg []byte) ([]byte, error) {
	f := deviceFields{capacity: span{len(d.capacity), len(d.capacity)}, consumes: span{len(d.consumes), len(d.consumes)}}
	out, err := eachField(out, msg, func(out []byte, num protowire.Number, message bool, field, value []byte) ([]byte, error) {
		if !message {
			return append(out, field...), nil
		}
		switch num {
		case fieldDeviceAttributes:
		case fieldDeviceName:
			f.name.from = len(d.names)
			d.names = append(d.names, value...)
			f.name.to, f.hasName = len(d.names), true
		case fieldDeviceCapacity:
			d.capacity = append(d.capacity, field...)
			f.capacity.to = len(d.capacity)
		case fieldDeviceConsumes:
			d.consumes = append(d.consumes, field...)
			f.consumes.to = len(d.consumes)
		default:
			out = append(out, field...)
		}
		return out, nil
	})
	d.devices = append(d.devices, f)
	return out, err
}

// eachField calls fn for every field of msg with the field's bytes (tag
// included) and, for a length-delimited field (message reports it), its
// value; fn appends what it keeps to out. Malformed input is an error.
func eachField(out, msg []byte, fn func(out []byte, num protowire.Number, message bool, field, value []byte) ([]byte, error)) ([]byte, error) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return out, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return out, protowire.ParseError(m)
		}
		field := msg[:n+m]
		msg = msg[n+m:]
		var value []byte
		message := typ == protowire.BytesType
		if message {
			value, _ = protowire.ConsumeBytes(field[n:])
		}
		var err error
		if out, err = fn(out, num, message, field, value); err != nil {
			return out, err
		}
	}
	return out, nil
}

// nested appends field num as a length-delimited field whose content
// content appends. The content is at most as long as the original value:
// room for the original's length prefix is reserved, the content written
// after it, and moved down if its own prefix turns out shorter.
func nested(out []byte, num protowire.Number, value []byte, content func(out []byte) ([]byte, error)) ([]byte, error) {
	out = protowire.AppendTag(out, num, protowire.BytesType)
	at := len(out)
	width := protowire.SizeVarint(uint64(len(value)))
	out = append(out, make([]byte, width)...)
	out, err := content(out)
	if err != nil {
		return out, err
	}
	size := len(out) - at - width
	var tmp [binary.MaxVarintLen64]byte
	prefix := protowire.AppendVarint(tmp[:0], uint64(size))
	copy(out[at:], prefix)
	if len(prefix) < width {
		copy(out[at+len(prefix):], out[at+width:])
		out = out[:len(out)-(width-len(prefix))]
	}
	return out, nil
}

// namesUnreadFields reports whether one encoded managedFields entry (tag
// included) records spec fields the compiled types cannot hold. Such
// entries are kept by PoolFields and TrimToPool: they are how a reader
// learns that the slice was not read completely (api.UnreadFields), and a
// slice has them only when a newer API server served such a field.
func namesUnreadFields(field []byte) bool {
	_, _, n := protowire.ConsumeTag(field)
	value, m := protowire.ConsumeBytes(field[n:])
	var e metav1.ManagedFieldsEntry
	if m < 0 || e.Unmarshal(value) != nil {
		// The generated Unmarshal of the whole slice reports it.
		return false
	}
	return len(api.UnreadFields([]metav1.ManagedFieldsEntry{e})) > 0
}

// TrimToPool drops from a decoded ResourceSlice what PoolFields drops on
// the wire: its managedFields (but those naming fields this build cannot
// read, see namesUnreadFields) and its devices' attributes. The monitor's
// informers and lists that did not arrive as protobuf use it.
func TrimToPool(s *resourcev1.ResourceSlice) {
	s.ManagedFields = slices.DeleteFunc(s.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
		return len(api.UnreadFields([]metav1.ManagedFieldsEntry{e})) == 0
	})
	if len(s.ManagedFields) == 0 {
		s.ManagedFields = nil
	}
	for i := range s.Spec.Devices {
		s.Spec.Devices[i].Attributes = nil
	}
}

// Sharer shares what ResourceSlices decoded elsewhere (by an informer)
// hold alike, as a list with PoolFields shares it: device names,
// capacities, counter consumption and counter sets. Values are told apart
// by their protobuf encoding, which is how the API server sent them: two
// values share one copy only if they encode the same. It is safe for
// concurrent use.
type Sharer struct {
	mu  sync.Mutex
	d   *poolDecoder
	buf []byte
}

// NewSharer returns a Sharer that shares nothing yet.
func NewSharer() *Sharer { return &Sharer{d: newPoolDecoder()} }

// Share replaces what s holds like a slice shared before by that slice's
// values; s holds equal values afterwards, and must not be modified again,
// as an informer's objects are not.
func (sh *Sharer) Share(s *resourcev1.ResourceSlice) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	d := sh.d
	for i := range s.Spec.Devices {
		dev := &s.Spec.Devices[i]
		dev.Name = d.nameOf(dev.Name)
		if dev.Capacity != nil {
			dev.Capacity = share(d.sharedCapacities, sh.encode(&resourcev1.Device{Capacity: dev.Capacity}), dev.Capacity)
		}
		if dev.ConsumesCounters != nil {
			dev.ConsumesCounters = share(d.sharedConsumes, sh.encode(&resourcev1.Device{ConsumesCounters: dev.ConsumesCounters}), dev.ConsumesCounters)
		}
	}
	if s.Spec.SharedCounters != nil {
		s.Spec.SharedCounters = share(d.sharedSets, sh.encode(&resourcev1.ResourceSliceSpec{SharedCounters: s.Spec.SharedCounters}), s.Spec.SharedCounters)
	}
	d.bound()
}

// share returns the value shared under key, or v, which it shares under
// key if there is one.
func share[V any](table map[string]V, key []byte, v V) V {
	if key == nil {
		return v
	}
	if shared, ok := table[string(key)]; ok {
		return shared
	}
	table[string(key)] = v
	return v
}

// encode encodes m into sh.buf; nil if it cannot be encoded (nothing is
// shared then).
func (sh *Sharer) encode(m interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}) []byte {
	n := m.Size()
	if cap(sh.buf) < n {
		sh.buf = make([]byte, n)
	}
	b := sh.buf[:n]
	if _, err := m.MarshalToSizedBuffer(b); err != nil {
		return nil
	}
	return b
}
