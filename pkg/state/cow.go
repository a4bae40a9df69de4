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
	root  *cowRoot[K, V]
	epoch uint32 // nodes of an older epoch may be shared with a view
	n     int
	hash  func(K) uint64
}

const cowFan = 64

type cowRoot[K comparable, V any] struct {
	epoch uint32
	mid   [cowFan]*cowMid[K, V]
}

type cowMid[K comparable, V any] struct {
	epoch uint32
	b     [cowFan]*cowBucket[K, V]
}

type cowBucket[K comparable, V any] struct {
	epoch uint32
	e     []cowEntry[K, V]
}

type cowEntry[K comparable, V any] struct {
	k K
	v V
}

// cowView is an immutable view of a cowMap; the zero view is empty.
type cowView[K comparable, V any] struct {
	root *cowRoot[K, V]
	n    int
	hash func(K) uint64
}

func newCowMap[K comparable, V any](hash func(K) uint64) *cowMap[K, V] {
	return &cowMap[K, V]{root: &cowRoot[K, V]{epoch: 1}, epoch: 1, hash: hash}
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

// bucket returns k's bucket, copying what a view may share on the way.
func (m *cowMap[K, V]) bucket(k K) *cowBucket[K, V] {
	h := m.hash(k)
	if m.root.epoch != m.epoch {
		r := *m.root
		r.epoch = m.epoch
		m.root = &r
	}
	i, j := h%cowFan, (h/cowFan)%cowFan
	mid := m.root.mid[i]
	switch {
	case mid == nil:
		mid = &cowMid[K, V]{epoch: m.epoch}
		m.root.mid[i] = mid
	case mid.epoch != m.epoch:
		c := *mid
		c.epoch = m.epoch
		mid = &c
		m.root.mid[i] = mid
	}
	b := mid.b[j]
	switch {
	case b == nil:
		b = &cowBucket[K, V]{epoch: m.epoch}
		mid.b[j] = b
	case b.epoch != m.epoch:
		b = &cowBucket[K, V]{epoch: m.epoch, e: slices.Clone(b.e)}
		mid.b[j] = b
	}
	return b
}

func (v cowView[K, V]) get(k K) (V, bool) {
	var zero V
	if v.root == nil {
		return zero, false
	}
	h := v.hash(k)
	mid := v.root.mid[h%cowFan]
	if mid == nil {
		return zero, false
	}
	b := mid.b[(h/cowFan)%cowFan]
	if b == nil {
		return zero, false
	}
	for i := range b.e {
		if b.e[i].k == k {
			return b.e[i].v, true
		}
	}
	return zero, false
}

func (v cowView[K, V]) len() int { return v.n }

// each calls f for every entry, in no particular order.
func (v cowView[K, V]) each(f func(K, V)) {
	if v.root == nil {
		return
	}
	for _, mid := range v.root.mid {
		if mid == nil {
			continue
		}
		for _, b := range mid.b {
			if b == nil {
				continue
			}
			for _, e := range b.e {
				f(e.k, e.v)
			}
		}
	}
}

var seed = maphash.MakeSeed()

func hashString(s string) uint64 { return maphash.String(seed, s) }

func hashPool(id pool.ID) uint64 {
	return maphash.String(seed, id.Driver)*31 ^ maphash.String(seed, id.Pool)
}

func hashClaim(k ClaimKey) uint64 {
	return maphash.String(seed, k.Namespace)*31 ^ maphash.String(seed, k.Name)
}
