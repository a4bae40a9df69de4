package decode

import (
	"bytes"
	"errors"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
)

// Most of a ResourceSlice's bytes are three maps per device: attributes,
// capacities and consumed counters. Across the nodes of a cluster the same
// entries repeat (every H100 has the same product name, memory and
// counters), so the fast path decodes each distinct entry once and copies
// the result: a fastDecoder keeps the values it decoded, keyed by their
// exact bytes, and the names it read. Copies own their memory, as if
// decoded afresh: the pointers of an attribute point to slots of their
// own, a quantity's big-number form is deep-copied.
//
// The maps are read with jsontext, which checks syntax, UTF-8 and
// duplicate names as the generic map decoder does; an entry's value is
// decoded with the same options as everything else. So a map decodes to
// what the generic decoder would produce, or fails where it would fail
// (FuzzFastObjectMatchesStrict covers these types too).

// maxCachedValues bounds each cache of a fastDecoder; a full cache is
// emptied and filled again.
const maxCachedValues = 1 << 12

// fastDecoder is the fast path's reusable state. It is used by one
// goroutine at a time (fastDecoders hands them out).
type fastDecoder struct {
	opts jsonv2.Options

	names    map[string]string
	attrs    map[string]resourcev1.DeviceAttribute
	caps     map[string]resourcev1.DeviceCapacity
	counters map[string]resourcev1.Counter

	attrEntries    []entry[resourcev1.QualifiedName, resourcev1.DeviceAttribute]
	capEntries     []entry[resourcev1.QualifiedName, resourcev1.DeviceCapacity]
	counterEntries []entry[string, resourcev1.Counter]

	slots slotArena
}

type entry[K ~string, V any] struct {
	key K
	val V // as cached: shares memory with the cache until owned
}

var fastDecoders = sync.Pool{New: func() any { return newFastDecoder() }}

func newFastDecoder() *fastDecoder {
	d := &fastDecoder{
		names:    map[string]string{},
		attrs:    map[string]resourcev1.DeviceAttribute{},
		caps:     map[string]resourcev1.DeviceCapacity{},
		counters: map[string]resourcev1.Counter{},
	}
	maps := jsonv2.JoinUnmarshalers(
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, m *map[resourcev1.QualifiedName]resourcev1.DeviceAttribute) error {
			return decodeMap(d, dec, m, d.attrs, &d.attrEntries, d.ownAttribute)
		}),
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, m *map[resourcev1.QualifiedName]resourcev1.DeviceCapacity) error {
			return decodeMap(d, dec, m, d.caps, &d.capEntries, ownCapacity)
		}),
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, m *map[string]resourcev1.Counter) error {
			return decodeMap(d, dec, m, d.counters, &d.counterEntries, ownCounter)
		}),
	)
	// The devices of a slice are decoded into a slice made at its final
	// size: growing it element by element would allocate twice the memory
	// of a big device list over again.
	d.opts = jsonv2.JoinOptions(fastOptions, jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(maps,
		jsonv2.UnmarshalFromFunc(presize[api.Device]),
	)))
	return d
}

// presize gives *s room for every element of the JSON array the decoder
// is about to read and then leaves the decoding to jsonv2 (by returning
// errors.ErrUnsupported without reading anything), which fills the
// capacity a slice has. The elements are counted by skipping over the
// unread input, far cheaper than reading the array as a value first,
// which would parse it twice. The count only sizes the slice: a wrong
// count could cost time, never change what is decoded.
func presize[T any](dec *jsontext.Decoder, s *[]T) error {
	if dec.PeekKind() != '[' {
		return errors.ErrUnsupported
	}
	// The unread input starts after the member name, before its colon.
	b := dec.UnreadBuffer()
	i := skipSpace(b, 0)
	if i < len(b) && b[i] == ':' {
		i++
	}
	if n := countElements(b[i:]); n > cap(*s) {
		*s = make([]T, 0, n)
	}
	return errors.ErrUnsupported
}

var errNotObject = errors.New("expected an object")

// decodeMap decodes a JSON object into *m as jsonv2 does (null leaves a
// nil map, an object fills a new map, anything else is an error), taking
// each value from cache when its bytes were decoded before. own copies a
// cached value into a value of its own.
func decodeMap[K ~string, V any](d *fastDecoder, dec *jsontext.Decoder, m *map[K]V, cache map[string]V,
	scratch *[]entry[K, V], own func(V) V) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		*m = nil
		return err
	case '{':
	default:
		return errNotObject
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if len(cache) >= maxCachedValues {
		clear(cache)
	}
	es := (*scratch)[:0]
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return err
		}
		key := d.name(name)
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		v, ok := cache[string(raw)]
		if !ok {
			if v, err = decodeValue[V](raw); err != nil {
				return err
			}
			cache[string(raw)] = v
		}
		es = append(es, entry[K, V]{key: K(key), val: v})
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if *m == nil {
		*m = make(map[K]V, len(es))
	}
	for i := range es {
		(*m)[es[i].key] = own(es[i].val)
	}
	clear(es) // drop references into the cache
	*scratch = es
	return nil
}

// decodeValue is kept apart so that only a missed value is allocated.
func decodeValue[V any](raw []byte) (V, error) {
	v := new(V)
	err := jsonv2.Unmarshal(raw, v, fastOptions)
	return *v, err
}

// name returns the unquoted form of a quoted JSON string that jsontext
// has validated, interned.
func (d *fastDecoder) name(quoted []byte) string {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		u, err := jsontext.AppendUnquote(nil, quoted)
		if err != nil {
			return string(raw) // cannot happen: jsontext validated it
		}
		raw = u
	}
	if s, ok := d.names[string(raw)]; ok {
		return s
	}
	if len(d.names) >= maxCachedValues {
		clear(d.names)
	}
	s := string(raw)
	d.names[s] = s
	return s
}

// ownAttribute copies an attribute, giving it value slots of its own.
// List values (rare) are deep-copied the generated way.
func (d *fastDecoder) ownAttribute(a resourcev1.DeviceAttribute) resourcev1.DeviceAttribute {
	var out resourcev1.DeviceAttribute
	if a.IntValues != nil || a.BoolValues != nil || a.StringValues != nil || a.VersionValues != nil {
		a.DeepCopyInto(&out)
		return out
	}
	if a.IntValue != nil {
		out.IntValue = d.slots.int64(*a.IntValue)
	}
	if a.BoolValue != nil {
		out.BoolValue = d.slots.bool(*a.BoolValue)
	}
	if a.StringValue != nil {
		out.StringValue = d.slots.string(*a.StringValue)
	}
	if a.VersionValue != nil {
		out.VersionValue = d.slots.string(*a.VersionValue)
	}
	return out
}

// ownCapacity and ownCounter copy a quantity's big-number form, if any,
// and a capacity's request policy.
func ownCapacity(c resourcev1.DeviceCapacity) resourcev1.DeviceCapacity {
	var out resourcev1.DeviceCapacity
	c.DeepCopyInto(&out)
	return out
}

func ownCounter(c resourcev1.Counter) resourcev1.Counter {
	var out resourcev1.Counter
	c.DeepCopyInto(&out)
	return out
}

// slotArena hands out pointers to fresh variables, allocated in chunks:
// one allocation serves many attribute values. Slots are never reused.
type slotArena struct {
	strings []string
	ints    []int64
	bools   []bool
}

func (a *slotArena) string(s string) *string { return take(&a.strings, s) }
func (a *slotArena) int64(n int64) *int64    { return take(&a.ints, n) }
func (a *slotArena) bool(b bool) *bool       { return take(&a.bools, b) }

const slotChunk = 256

func take[T any](chunk *[]T, v T) *T {
	if len(*chunk) == 0 {
		*chunk = make([]T, slotChunk)
	}
	p := &(*chunk)[0]
	*chunk = (*chunk)[1:]
	*p = v
	return p
}
