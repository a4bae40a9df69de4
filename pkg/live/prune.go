package live

import (
	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
)

// What `get pools`, pool validation and the pool monitor read of a
// ResourceSlice is its pool, node selection, devices' names, capacities,
// counter consumption and taints, and its counter sets: never a device's
// attributes (those feed CEL selectors, which only allocation evaluates)
// nor managedFields. A DGX H100 MIG device has a dozen attributes, each a
// map entry holding a struct of pointers, which is most of what decoding a
// slice allocates. PoolFields drops both: from the protobuf bytes before
// the generated Unmarshal runs, or from decoded objects (TrimToPool).

// pruner removes fields from an encoded protobuf message. A field in drop
// is left out; a field in keep is a message (or repeated message) whose
// own fields are pruned by the pruner it names; every other field is
// copied as it is.
type pruner struct {
	drop map[protowire.Number]bool
	keep map[protowire.Number]*pruner
}

// slicePoolFields prunes a resource.k8s.io/v1 ResourceSlice to its pool
// fields. Field numbers are those of k8s.io/api/resource/v1's and
// k8s.io/apimachinery's generated.proto.
var slicePoolFields = &pruner{keep: map[protowire.Number]*pruner{
	1: {drop: map[protowire.Number]bool{17: true}}, // metadata: managedFields
	2: {keep: map[protowire.Number]*pruner{ // spec
		6: {drop: map[protowire.Number]bool{2: true}}, // devices: attributes
	}},
}}

const binaryMaxVarint = 10

// prune appends msg without the pruned fields to out. Malformed input is
// an error; the fields it keeps are copied byte for byte.
func (p *pruner) prune(out, msg []byte) ([]byte, error) {
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
		sub := p.keep[num]
		switch {
		case p.drop[num]:
		case sub != nil && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(field[n:])
			// The pruned value is at most as long as v: reserve room for
			// v's length prefix, prune in place after it, then move the
			// value down if its own prefix turned out shorter.
			out = protowire.AppendTag(out, num, typ)
			at := len(out)
			width := protowire.SizeVarint(uint64(len(v)))
			out = append(out, make([]byte, width)...)
			var err error
			if out, err = sub.prune(out, v); err != nil {
				return out, err
			}
			size := len(out) - at - width
			var tmp [binaryMaxVarint]byte
			prefix := protowire.AppendVarint(tmp[:0], uint64(size))
			copy(out[at:], prefix)
			if len(prefix) < width {
				copy(out[at+len(prefix):], out[at+width:])
				out = out[:len(out)-(width-len(prefix))]
			}
		default:
			out = append(out, field...)
		}
	}
	return out, nil
}

// TrimToPool drops from a decoded ResourceSlice what PoolFields drops on
// the wire: its managedFields and its devices' attributes. The monitor's
// informers and lists that did not arrive as protobuf use it.
func TrimToPool(s *resourcev1.ResourceSlice) {
	s.ManagedFields = nil
	for i := range s.Spec.Devices {
		s.Spec.Devices[i].Attributes = nil
	}
}
