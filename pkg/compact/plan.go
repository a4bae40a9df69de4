package compact

import (
	"container/heap"
	"encoding/binary"
	"strconv"
)

// The planner is shared by the three mixin kinds. It sees a list of
// "owners" (devices, counter consumptions or counter sets), each holding a
// set of "items" (one map entry: which map, key and encoded value), and
// decides which groups of items become mixins and which owners include
// them.
//
// Candidate groups are the classes of items that have exactly the same
// set of owners. Within a class every owner has every item, so a mixin made
// of the class is a subset of each including owner's entries and no
// precedence question arises: the owner simply no longer states those
// entries itself. Classes are disjoint, so an owner may include any
// combination of them in any order. Picking the classes greedily by bytes
// saved factors the largest shared groups out first.

// item is one map entry of an owner.
type item struct {
	m    int // which map of the owner: attributes, capacity, counters
	key  string
	json []byte // encoding of the value; equal bytes mean equal values
	cost int    // bytes of `"key":value,` inside the owner's map
}

type owner struct {
	items    []int // item ids, ascending
	includes int
	left     [maxMaps]int // entries still stated directly, per map
}

const maxMaps = 2

// costs describes the JSON shape of one mixin kind, in bytes.
type costs struct {
	prefix string // mixin names are prefix + index
	// mapKey[m] is the length of `,"attributes":{}` for map m: what an
	// owner or a mixin spends on the map beyond its entries.
	mapKey [maxMaps]int
	// first is spent once when the first mixin of the kind is created:
	// `"device":[]` and, for the first kind at all, `"mixins":{}`.
	first       int
	maxIncludes int
	maxMixins   int
}

type group struct {
	items   []int
	members []int // owner indexes, ascending
	score   int
	index   int // position among candidate classes: the tie-breaker
}

// plan returns the accepted groups in acceptance order. Each group's
// members are the owners that include it.
func plan(items []item, owners []owner, c costs, firstOfAll *bool) []group {
	// Group items by the exact list of owners that hold them.
	support := make([][]int, len(items))
	for o := range owners {
		for _, it := range owners[o].items {
			support[it] = append(support[it], o)
		}
	}
	byKey := map[string]int{}
	var cands []*group
	var buf []byte
	for it, sup := range support {
		if len(sup) < 2 {
			continue
		}
		buf = buf[:0]
		for _, o := range sup {
			buf = binary.AppendUvarint(buf, uint64(o))
		}
		if gi, ok := byKey[string(buf)]; ok {
			cands[gi].items = append(cands[gi].items, it)
			continue
		}
		byKey[string(buf)] = len(cands)
		cands = append(cands, &group{items: []int{it}, members: sup, index: len(cands)})
	}

	var accepted []group
	firstOfKind := true
	score := func(g *group) (int, []int) {
		name := len(c.prefix) + len(strconv.Itoa(len(accepted)))
		var per [maxMaps]int
		var entries [maxMaps]int
		for _, it := range g.items {
			per[items[it].m] += items[it].cost
			entries[items[it].m]++
		}
		// The mixin's own definition: {"name":"x", maps...},
		def := len(`{"name":""},`) + name
		for m := range maxMaps {
			if entries[m] > 0 {
				def += c.mapKey[m] + per[m] - 1
			}
		}
		if firstOfKind {
			def += c.first
			if *firstOfAll {
				def += len(`,"mixins":{}`)
			}
		}
		gain := -def
		var members []int
		for _, o := range g.members {
			ow := &owners[o]
			if ow.includes >= c.maxIncludes {
				continue
			}
			members = append(members, o)
			for m := range maxMaps {
				gain += per[m]
				if entries[m] > 0 && ow.left[m] == entries[m] {
					gain += c.mapKey[m] // the owner's map disappears
				}
			}
			if ow.includes == 0 {
				gain -= len(`,"includes":[""]`) + name
			} else {
				gain -= len(`,""`) + name
			}
		}
		if len(members) < 2 {
			return 0, nil
		}
		return gain, members
	}

	h := &groupHeap{}
	for _, g := range cands {
		// Scores may still rise (the kind's fixed overhead is paid by the
		// first mixin only), so even unprofitable classes are queued.
		g.score, _ = score(g)
		heap.Push(h, g)
	}
	for h.Len() > 0 && len(accepted) < c.maxMixins {
		g := heap.Pop(h).(*group)
		s, members := score(g)
		if s <= 0 {
			continue
		}
		if s != g.score {
			// The state changed since it was scored (owners filled up their
			// includes, maps shrank): requeue with the fresh score.
			g.score = s
			heap.Push(h, g)
			continue
		}
		per := [maxMaps]int{}
		for _, it := range g.items {
			per[items[it].m]++
		}
		for _, o := range members {
			owners[o].includes++
			for m := range maxMaps {
				owners[o].left[m] -= per[m]
			}
		}
		accepted = append(accepted, group{items: g.items, members: members, score: s, index: g.index})
		firstOfKind = false
		*firstOfAll = false
	}
	return accepted
}

// groupHeap pops the highest score first and, among equal scores, the
// earliest class, so the plan is deterministic.
type groupHeap []*group

func (h groupHeap) Len() int { return len(h) }
func (h groupHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return h[i].index < h[j].index
}
func (h groupHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *groupHeap) Push(x any)   { *h = append(*h, x.(*group)) }
func (h *groupHeap) Pop() any {
	old := *h
	g := old[len(old)-1]
	*h = old[:len(old)-1]
	return g
}
