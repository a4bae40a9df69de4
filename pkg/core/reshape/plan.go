package reshape

import (
	"container/heap"
	"slices"
	"strconv"
	"strings"
)

// The planner is shared by the three mixin kinds. It sees a list of
// "owners" (devices, counter consumptions or counter sets), each holding a
// set of "items" (one map entry: which map, key and encoded value), and
// decides which sets of items become mixins and which owners include them.
//
// A mixin only ever holds items that every including owner has itself,
// with the same encoded value. Mixins included by one owner may therefore
// overlap: whichever of them wins under KEP-5234's "later includes win"
// rule, the value is the owner's own, so the include order is free and no
// owner has to override anything.
//
// Candidates are closed item sets: the items two owners share, and the
// items shared by all owners of an item. A candidate thus grows to the
// largest set its owners have in common (a MIG profile's attributes,
// capacities and common attributes in one mixin) while smaller candidates
// still factor out what crosses those groups (a GPU's parent attributes, a
// placement). Greedy selection by bytes saved, counting only items an owner
// does not already get from a mixin it includes, layers them: the most
// widely shared set first, then what is left.

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
	covered  []bool       // by item id: a mixin included so far provides it
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

// group is a candidate mixin: its items and, once scored, the owners that
// gain from including it.
type group struct {
	items   []int
	holders []int // every owner that has all items, ascending
	members []int // owner indexes, ascending
	score   int
	index   int // position among candidates: the tie-breaker
}

// maxPairOwners bounds the pairwise candidate search, which is quadratic
// in the owners. KEP-5234 caps a slice at 128 devices with 4 consumptions
// each; beyond this bound only the per-item candidates are used.
const maxPairOwners = 1024

// candidates returns the distinct closed item sets worth scoring, in a
// deterministic order.
func candidates(nItems int, owners []owner) []*group {
	support := supports(nItems, owners)
	seen := map[string]bool{}
	var sets [][]int
	add := func(set []int) {
		if len(set) == 0 {
			return
		}
		var b strings.Builder
		for _, it := range set {
			b.WriteString(strconv.Itoa(it))
			b.WriteByte(',')
		}
		if k := b.String(); !seen[k] {
			seen[k] = true
			sets = append(sets, set)
		}
	}
	// The items shared by all owners of an item.
	for _, sup := range support {
		if len(sup) < 2 {
			continue
		}
		set := slices.Clone(owners[sup[0]].items)
		for _, o := range sup[1:] {
			set = intersect(set, owners[o].items)
		}
		add(set)
	}
	// The items two owners share.
	if len(owners) <= maxPairOwners {
		for a := range owners {
			for b := a + 1; b < len(owners); b++ {
				add(intersect(slices.Clone(owners[a].items), owners[b].items))
			}
		}
	}
	slices.SortFunc(sets, slices.Compare)
	out := make([]*group, len(sets))
	for i, set := range sets {
		holders := support[set[0]]
		for _, it := range set[1:] {
			holders = intersect(slices.Clone(holders), support[it])
		}
		out[i] = &group{items: set, holders: holders, index: i}
	}
	return out
}

// supports lists, by item id, the owners holding the item, ascending.
func supports(nItems int, owners []owner) [][]int {
	support := make([][]int, nItems)
	for o := range owners {
		for _, it := range owners[o].items {
			support[it] = append(support[it], o)
		}
	}
	return support
}

// intersect keeps the elements of a (ascending) that are in b (ascending),
// reusing a's storage.
func intersect(a, b []int) []int {
	out := a[:0]
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j < len(b) && b[j] == x {
			out = append(out, x)
		}
	}
	return out
}

// classes returns the candidates of the disjoint plan: the classes of
// items held by exactly the same owners. Classes never overlap, so they
// layer where closed sets would repeat an entry in several mixins: on a
// slice whose owners share one entry across groups that otherwise differ
// (every TPU sub-slice has the accelerator type, each shape its own
// topology), the greedy choice of closed sets takes each shape's set with
// the shared entry inside and then cannot factor that entry out for what
// is left.
func classes(nItems int, owners []owner) []*group {
	support := supports(nItems, owners)
	byOwners := map[string]int{}
	var out []*group
	for it, sup := range support {
		if len(sup) < 2 {
			continue
		}
		var b strings.Builder
		for _, o := range sup {
			b.WriteString(strconv.Itoa(o))
			b.WriteByte(',')
		}
		if gi, ok := byOwners[b.String()]; ok {
			out[gi].items = append(out[gi].items, it)
			continue
		}
		byOwners[b.String()] = len(out)
		out = append(out, &group{items: []int{it}, holders: sup, index: len(out)})
	}
	return out
}

// planners generate the candidates of the plans compared by plan.
var planners = []func(nItems int, owners []owner) []*group{candidates, classes}

// plan returns the accepted groups in acceptance order. Each group's items
// are what its mixin holds and its members the owners that include it.
// Both candidate kinds are planned greedily; the plan that saves more
// bytes wins (closed sets on a tie), and owners and firstOfAll are left
// as that plan leaves them.
func plan(items []item, owners []owner, c costs, firstOfAll *bool) []group {
	var best []group
	var bestOwners []owner
	bestSaved, bestFirst := -1, *firstOfAll
	for _, gen := range planners {
		try := slices.Clone(owners)
		first := *firstOfAll
		groups := greedy(items, try, c, &first, gen(len(items), try))
		saved := 0
		for _, g := range groups {
			saved += g.score
		}
		if saved > bestSaved {
			best, bestOwners, bestSaved, bestFirst = groups, try, saved, first
		}
	}
	copy(owners, bestOwners)
	*firstOfAll = bestFirst
	return best
}

// greedy accepts candidates by the bytes they still save, highest first.
func greedy(items []item, owners []owner, c costs, firstOfAll *bool, cands []*group) []group {
	for o := range owners {
		owners[o].covered = make([]bool, len(items))
	}
	var accepted []group
	firstOfKind := true
	// score returns the bytes saved by making g a mixin now, the owners
	// that include it and the items it needs to hold.
	score := func(g *group) (int, []int, []int) {
		name := len(c.prefix) + len(strconv.Itoa(len(accepted)))
		var members []int
		need := make([]bool, len(items))
		gain := 0
		for _, o := range g.holders {
			ow := &owners[o]
			if ow.includes >= c.maxIncludes {
				continue
			}
			var per, entries [maxMaps]int
			for _, it := range g.items {
				if !ow.covered[it] {
					per[items[it].m] += items[it].cost
					entries[items[it].m]++
				}
			}
			og := 0
			for m := range maxMaps {
				og += per[m]
				if entries[m] > 0 && ow.left[m] == entries[m] {
					og += c.mapKey[m] // the owner's map disappears
				}
			}
			if ow.includes == 0 {
				og -= len(`,"includes":[""]`) + name
			} else {
				og -= len(`,""`) + name
			}
			if og <= 0 {
				continue
			}
			gain += og
			members = append(members, o)
			for _, it := range g.items {
				if !ow.covered[it] {
					need[it] = true
				}
			}
		}
		if len(members) < 2 {
			return 0, nil, nil
		}
		var held []int
		var per, entries [maxMaps]int
		for _, it := range g.items {
			if need[it] {
				held = append(held, it)
				per[items[it].m] += items[it].cost
				entries[items[it].m]++
			}
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
		return gain - def, members, held
	}

	h := &groupHeap{}
	for _, g := range cands {
		// Scores may still rise (the kind's fixed overhead is paid by the
		// first mixin only), so even unprofitable candidates are queued.
		g.score, _, _ = score(g)
		heap.Push(h, g)
	}
	for h.Len() > 0 && len(accepted) < c.maxMixins {
		g := heap.Pop(h).(*group)
		s, members, held := score(g)
		if s <= 0 {
			continue
		}
		if s != g.score {
			// The state changed since it was scored (owners gained
			// mixins, filled up their includes, maps shrank): requeue with
			// the fresh score.
			g.score = s
			heap.Push(h, g)
			continue
		}
		for _, o := range members {
			ow := &owners[o]
			ow.includes++
			for _, it := range held {
				if !ow.covered[it] {
					ow.covered[it] = true
					ow.left[items[it].m]--
				}
			}
		}
		accepted = append(accepted, group{items: held, members: members, score: s, index: g.index})
		firstOfKind = false
		*firstOfAll = false
	}
	return accepted
}

// groupHeap pops the highest score first and, among equal scores, the
// earliest candidate, so the plan is deterministic.
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
