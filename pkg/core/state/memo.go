package state

import (
	"encoding/binary"
	"errors"
	"maps"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
)

// A node's answer to a cycle (its results, or why the claims do not fit)
// depends on nothing but the claims' specs and namespace, the classes, the
// Node object, the allocation strategy and the pools the node sees, with
// what claims hold of them. A scheduler asks every node in every cycle,
// and between two cycles one node's pool changes (the last pod's claims
// were assumed there), so with Options.MemoizeNodes a node's answer is
// kept on its pool entry, which the State replaces whenever the pool's
// slices or holders change, and given again to the next cycle whose
// claims have the same specs. Only a node that sees exactly one pool (its
// own, as most do) remembers; answers that ended for another reason
// (timeout, cancellation, a fatal error) are not kept.

// maxMemoShapes bounds the answers one pool entry keeps: one per shape of
// claims asked about since the pool last changed. Past it the entry starts
// over.
const maxMemoShapes = 16

// nodeMemo is a pool entry's remembered answers, by shape.
type nodeMemo struct {
	mu      sync.Mutex
	answers map[*shape]*answer
}

// shape is an interned memo key (see shapeOf): a cycle asks every node,
// and comparing keys by identity costs nothing next to hashing and
// comparing their bytes once per node.
type shape struct{ key string }

// maxShapes bounds the shapes the State interns; past it, it starts over
// (answers remembered under the old shapes are then not found again).
const maxShapes = 4096

// answer is one Allocate outcome for a shape of claims on a node.
type answer struct {
	node    *corev1.Node // the object it was computed for, compared by identity
	results []*resourcev1.AllocationResult
	unfit   *allocator.UnfitError
	// claims are the names ("namespace/name") of the claims it was
	// computed for, in cycle order: an explanation names them, and is
	// renamed for the claims of a later cycle.
	claims []string
}

func (m *nodeMemo) get(sh *shape, node *corev1.Node) *answer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.answers[sh]; a != nil && a.node == node {
		return a
	}
	return nil
}

// copyFrom gives m, a new entry's memo no cycle has seen yet, the answers
// of o, the entry it replaces, when the replacement changed nothing an
// answer depends on.
func (m *nodeMemo) copyFrom(o *nodeMemo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.answers) > 0 {
		m.answers = maps.Clone(o.answers)
	}
}

func (m *nodeMemo) put(sh *shape, a *answer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.answers == nil || len(m.answers) >= maxMemoShapes {
		m.answers = map[*shape]*answer{}
	}
	m.answers[sh] = a
}

// MemoStats count how Allocate calls of cycles were answered, when the
// State remembers answers (Options.MemoizeNodes).
type MemoStats struct {
	// Hits were answered from memory, Misses by the allocator (on nodes
	// that remember).
	Hits, Misses int64
}

// memoShared is what the State and its snapshots share for remembering
// answers: the counters and the interned shapes.
type memoShared struct {
	hits, misses atomic.Int64

	mu     sync.Mutex
	shapes map[string]*shape
}

// intern returns the one shape of key.
func (m *memoShared) intern(key string) *shape {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sh := m.shapes[key]; sh != nil {
		return sh
	}
	if m.shapes == nil || len(m.shapes) >= maxShapes {
		m.shapes = map[string]*shape{}
	}
	sh := &shape{key: key}
	m.shapes[key] = sh
	return sh
}

// shapeOf is the key of what, besides the node and its pools, an answer
// depends on: the strategy, the classes (by the State's count of class
// changes) and every claim's namespace and spec. Specs are compared in
// their protobuf encoding, which the API machinery keeps deterministic
// (map keys sorted). ok is false for a claim that cannot be encoded.
func shapeOf(strategy allocator.Strategy, classGen uint64, claims []*resourcev1.ResourceClaim) (key string, ok bool) {
	b := make([]byte, 0, 256)
	b = append(b, byte(strategy))
	b = binary.AppendUvarint(b, classGen)
	for _, c := range claims {
		spec, err := c.Spec.Marshal()
		if err != nil {
			return "", false
		}
		b = binary.AppendUvarint(b, uint64(len(c.Namespace)))
		b = append(b, c.Namespace...)
		b = binary.AppendUvarint(b, uint64(len(spec)))
		b = append(b, spec...)
	}
	return string(b), true
}

// memoOf returns the memory of the node's one pool, or nil when the node
// does not remember (see source.NodePools for which pools a node sees).
func (s *Snapshot) memoOf(node *corev1.Node) *nodeMemo {
	if len(s.shared) > 0 {
		return nil
	}
	own := s.slotsOfNode(node.Name)
	if own.one == nil {
		return nil
	}
	if e := s.entry(own.one); e != nil {
		return &e.memo
	}
	return nil
}

// recall gives a remembered answer to a cycle's claims: results as they
// were (callers must not modify results), an explanation with its claims
// renamed.
func (a *answer) recall(claims []string) ([]*resourcev1.AllocationResult, error) {
	if a.unfit == nil {
		return a.results, nil
	}
	expl := *a.unfit.Explanation
	expl.Claims = make([]allocator.ClaimExplanation, len(a.unfit.Explanation.Claims))
	for i, ce := range a.unfit.Explanation.Claims {
		for j, name := range a.claims {
			if name == ce.Claim && j < len(claims) {
				ce.Claim = claims[j]
				break
			}
		}
		expl.Claims[i] = ce
	}
	return nil, &allocator.UnfitError{Node: a.unfit.Node, Explanation: &expl}
}

// remember keeps an outcome worth keeping.
func (m *nodeMemo) remember(sh *shape, node *corev1.Node, claims []string, res []*resourcev1.AllocationResult, err error) {
	var unfit *allocator.UnfitError
	switch {
	case err == nil:
	case errors.As(err, &unfit):
	default:
		return
	}
	m.put(sh, &answer{node: node, results: res, unfit: unfit, claims: claims})
}
