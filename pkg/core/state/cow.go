package state

import (
	"hash/maphash"
	"slices"

	"github.com/dractl/dractl/pkg/core/pool"
)

// cowMap is a map that hands out immutable views of itself in O(1)
// (freeze), which is what makes a Snapshot cost the same on ten nodes and
// on ten thousand. It is a hash trie of small buckets: a node is a bucket
// until it holds more than cowBucket entries, then it splits into cowFan
// children by the next bits of the hash. After a freeze, a write copies
// the nodes on its path (a few hundred bytes: one node on a small map,
// three on a map of thousands); writes between two freezes change nodes
// in place, because no view holds them.
//
// Persistent maps from libraries (a HAMT, a B-tree, an immutable radix
// tree) do the same with more generality, but measured 4–7 µs per update
// here, more than a whole scheduling cycle may cost.
type cowMap[K comparable, V any] struct {
	root  *cowNode[K, V]
	epoch uint32 // nodes of an older epoch may be shared with a view
	n     int
	hash  func(K) uint64
}

// cowFan children per inner node, cowBits of the hash each; a bucket
// splits past cowBucket entries (unless the hash is used up).
const (
	cowBits   = 4
	cowFan    = 1 << cowBits
	cowBucket = 8
)

// cowNode is an inner node (kids set) or a bucket (e).
type cowNode[K comparable, V any] struct {
	epoch uint32
	kids  *[cowFan]*cowNode[K, V]
	e     []cowEntry[K, V]
}

type cowEntry[K comparable, V any] struct {
	h uint64 // the key's hash, compared before the key
	k K
	v V
}

// cowView is an immutable view of a cowMap; the zero view is empty.
type cowView[K comparable, V any] struct {
	root *cowNode[K, V]
	n    int
	hash func(K) uint64
}

func newCowMap[K comparable, V any](hash func(K) uint64) *cowMap[K, V] {
	return &cowMap[K, V]{root: &cowNode[K, V]{epoch: 1}, epoch: 1, hash: hash}
}

// freeze returns a view of the map as it is; later writes do not show in
// it.
func (m *cowMap[K, V]) freeze() cowView[K, V] {
	v := cowView[K, V]{root: m.root, n: m.n, hash: m.hash}
	m.epoch++
	return v
}

func (m *cowMap[K, V]) get(k K) (V, bool) {
	return m.lookup(m.hash(k), k)
}

// lookup is get for a key whose hash h the caller has: a delta that reads
// an entry and writes it back hashes its key once (lookup, put).
func (m *cowMap[K, V]) lookup(h uint64, k K) (V, bool) {
	return cowView[K, V]{root: m.root, n: m.n, hash: m.hash}.lookup(h, k)
}

func (m *cowMap[K, V]) len() int { return m.n }

func (m *cowMap[K, V]) set(k K, v V) { m.put(m.hash(k), k, v) }

// put is set for a key whose hash h the caller has.
func (m *cowMap[K, V]) put(h uint64, k K, v V) {
	b, depth := m.bucket(h)
	for i := range b.e {
		if b.e[i].h == h && b.e[i].k == k {
			b.e[i].v = v
			return
		}
	}
	b.e = append(b.e, cowEntry[K, V]{h, k, v})
	m.n++
	if len(b.e) > cowBucket && (depth+1)*cowBits <= 64 {
		m.split(b, depth)
	}
}

// split turns bucket b, at depth, into an inner node with the entries
// spread over new buckets by the next bits of their hashes.
func (m *cowMap[K, V]) split(b *cowNode[K, V], depth int) {
	kids := new([cowFan]*cowNode[K, V])
	shift := uint(depth * cowBits)
	for _, e := range b.e {
		i := (e.h >> shift) % cowFan
		if kids[i] == nil {
			kids[i] = &cowNode[K, V]{epoch: m.epoch}
		}
		kids[i].e = append(kids[i].e, e)
	}
	b.kids, b.e = kids, nil
}

// cowInner is an inner node with its children, in one allocation.
type cowInner[K comparable, V any] struct {
	n    cowNode[K, V]
	kids [cowFan]*cowNode[K, V]
}

// cowSmall and cowFull are a bucket with its entries, in one allocation:
// a write after a freeze copies its bucket, and a delta (one claim)
// writes one bucket of each of two maps. cowSmall fits the buckets of a
// map of few entries (a node's pool, a pod's claim), cowFull a bucket
// about to split.
type cowSmall[K comparable, V any] struct {
	n cowNode[K, V]
	e [2]cowEntry[K, V]
}

type cowFull[K comparable, V any] struct {
	n cowNode[K, V]
	e [cowBucket + 1]cowEntry[K, V]
}

func (m *cowMap[K, V]) del(k K) {
	h := m.hash(k)
	if _, ok := m.get(k); !ok {
		// Copy nothing for a key that is not there.
		return
	}
	b, _ := m.bucket(h)
	for i := range b.e {
		if b.e[i].h == h && b.e[i].k == k {
			b.e = slices.Delete(b.e, i, i+1)
			m.n--
			return
		}
	}
}

// bucket returns the bucket of hash h and its depth, copying on the way
// what a view may share.
func (m *cowMap[K, V]) bucket(h uint64) (*cowNode[K, V], int) {
	if m.root.epoch != m.epoch {
		m.root = m.own(m.root)
	}
	n := m.root
	depth := 0
	for n.kids != nil {
		i := h % cowFan
		h >>= cowBits
		kid := n.kids[i]
		switch {
		case kid == nil:
			kid = &cowNode[K, V]{epoch: m.epoch}
			n.kids[i] = kid
		case kid.epoch != m.epoch:
			kid = m.own(kid)
			n.kids[i] = kid
		}
		n = kid
		depth++
	}
	return n, depth
}

// own copies a node of an older epoch into this one.
func (m *cowMap[K, V]) own(n *cowNode[K, V]) *cowNode[K, V] {
	if n.kids != nil {
		c := &cowInner[K, V]{kids: *n.kids}
		c.n.epoch, c.n.kids = m.epoch, &c.kids
		return &c.n
	}
	var c *cowNode[K, V]
	switch {
	case len(n.e) == 0:
		c = &cowNode[K, V]{}
	case len(n.e) <= 2:
		b := new(cowSmall[K, V])
		b.n.e = b.e[:0]
		c = &b.n
	case len(n.e) <= cowBucket+1:
		b := new(cowFull[K, V])
		b.n.e = b.e[:0]
		c = &b.n
	default:
		// A bucket whose hash is used up grows past cowBucket.
		c = &cowNode[K, V]{e: make([]cowEntry[K, V], 0, len(n.e))}
	}
	c.epoch = m.epoch
	c.e = append(c.e, n.e...)
	return c
}

func (v cowView[K, V]) get(k K) (V, bool) {
	if v.root == nil {
		var zero V
		return zero, false
	}
	return v.lookup(v.hash(k), k)
}

func (v cowView[K, V]) lookup(h uint64, k K) (V, bool) {
	var zero V
	n := v.root
	if n == nil {
		return zero, false
	}
	for g := h; n.kids != nil; g >>= cowBits {
		if n = n.kids[g%cowFan]; n == nil {
			return zero, false
		}
	}
	for i := range n.e {
		if n.e[i].h == h && n.e[i].k == k {
			return n.e[i].v, true
		}
	}
	return zero, false
}

func (v cowView[K, V]) len() int { return v.n }

// each calls f for every entry, in no particular order.
func (v cowView[K, V]) each(f func(K, V)) {
	var walk func(n *cowNode[K, V])
	walk = func(n *cowNode[K, V]) {
		if n == nil {
			return
		}
		for _, e := range n.e {
			f(e.k, e.v)
		}
		if n.kids != nil {
			for _, kid := range n.kids {
				walk(kid)
			}
		}
	}
	walk(v.root)
}

var seed = maphash.MakeSeed()

func hashString(s string) uint64 { return maphash.String(seed, s) }

func hashPool(id pool.ID) uint64 {
	return maphash.String(seed, id.Driver)*31 ^ maphash.String(seed, id.Pool)
}

func hashClaim(k ClaimKey) uint64 {
	return maphash.String(seed, k.Namespace)*31 ^ maphash.String(seed, k.Name)
}
