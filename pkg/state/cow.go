package state

import (
	"hash/maphash"
	"slices"

	"github.com/dractl/dractl/pkg/pool"
)

// cowMap is a map that hands out immutable views of itself in O(1)
// (freeze), which is what makes a Snapshot cost the same on ten nodes and
// on ten thousand. It is a fixed two-level table of small buckets: after a
// freeze, a write copies the bucket it changes and the two 64-entry arrays
// on its path (about a kilobyte, whatever the size of the map); writes
// between two freezes change nodes in place, because no view holds them.
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

// cowFan and cowDepth make 4096 buckets: a bucket holds one entry up to a
// few thousand entries and a few dozen at a hundred thousand, while a
// write copies three 16-way nodes.
const (
	cowFan   = 16
	cowDepth = 3
)

// cowNode is an inner node (kids) or, at cowDepth, a bucket (e).
type cowNode[K comparable, V any] struct {
	epoch uint32
	kids  [cowFan]*cowNode[K, V]
	e     []cowEntry[K, V]
}

type cowEntry[K comparable, V any] struct {
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
	return cowView[K, V]{root: m.root, n: m.n, hash: m.hash}.get(k)
}

func (m *cowMap[K, V]) len() int { return m.n }

func (m *cowMap[K, V]) set(k K, v V) {
	b := m.bucket(k)
	for i := range b.e {
		if b.e[i].k == k {
			b.e[i].v = v
			return
		}
	}
	b.e = append(b.e, cowEntry[K, V]{k, v})
	m.n++
}

func (m *cowMap[K, V]) del(k K) {
	b := m.bucket(k)
	for i := range b.e {
		if b.e[i].k == k {
			b.e = slices.Delete(b.e, i, i+1)
			m.n--
			return
		}
	}
}

// bucket returns k's bucket, copying on the way what a view may share.
func (m *cowMap[K, V]) bucket(k K) *cowNode[K, V] {
	h := m.hash(k)
	if m.root.epoch != m.epoch {
		m.root = m.own(m.root)
	}
	n := m.root
	for range cowDepth {
		i := h % cowFan
		h /= cowFan
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
	}
	return n
}

// own copies a node of an older epoch into this one.
func (m *cowMap[K, V]) own(n *cowNode[K, V]) *cowNode[K, V] {
	c := &cowNode[K, V]{epoch: m.epoch, kids: n.kids}
	if n.e != nil {
		c.e = slices.Clone(n.e)
	}
	return c
}

func (v cowView[K, V]) get(k K) (V, bool) {
	var zero V
	n := v.root
	if n == nil {
		return zero, false
	}
	h := v.hash(k)
	for range cowDepth {
		if n = n.kids[h%cowFan]; n == nil {
			return zero, false
		}
		h /= cowFan
	}
	for i := range n.e {
		if n.e[i].k == k {
			return n.e[i].v, true
		}
	}
	return zero, false
}

func (v cowView[K, V]) len() int { return v.n }

// each calls f for every entry, in no particular order.
func (v cowView[K, V]) each(f func(K, V)) {
	var walk func(n *cowNode[K, V], depth int)
	walk = func(n *cowNode[K, V], depth int) {
		if n == nil {
			return
		}
		if depth == cowDepth {
			for _, e := range n.e {
				f(e.k, e.v)
			}
			return
		}
		for _, kid := range n.kids {
			walk(kid, depth+1)
		}
	}
	walk(v.root, 0)
}

var seed = maphash.MakeSeed()

func hashString(s string) uint64 { return maphash.String(seed, s) }

func hashPool(id pool.ID) uint64 {
	return maphash.String(seed, id.Driver)*31 ^ maphash.String(seed, id.Pool)
}

func hashClaim(k ClaimKey) uint64 {
	return maphash.String(seed, k.Namespace)*31 ^ maphash.String(seed, k.Name)
}
