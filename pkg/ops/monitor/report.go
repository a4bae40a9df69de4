package monitor

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/live"
)

// regression is a slice update to an older pool generation.
type regression struct {
	slice    string
	from, to int64
}

// report compares each pool with what was seen before and emits the
// Events due: a new problem (at once if invalid, after the grace period if
// incomplete) and a recovery from a reported problem.
func (m *Monitor) report(statuses []poolStatus) {
	now := m.opts.Clock.Now()
	relead := m.relead.Swap(false)
	seen := make(map[pool.ID]bool, len(statuses))
	for i := range statuses {
		s := &statuses[i]
		id := s.usage.ID
		seen[id] = true
		t := m.tracked[id]
		if t == nil {
			t = &tracked{condition: state.PoolOK, since: now}
			m.tracked[id] = t
		}
		if t.condition != s.condition || t.reason != s.reason {
			if t.condition != s.condition {
				t.since = now
			}
			t.condition, t.reason = s.condition, s.reason
		}
		if relead {
			t.reported = ""
			t.regressionReported = false
			t.taints = nil
		}
		m.reportTaints(s, t)
		key := string(s.condition) + ": " + s.reason
		switch {
		case s.condition == state.PoolOK:
			if t.reported != "" {
				m.emit(s, corev1.EventTypeNormal, ReasonPoolRecovered, fmt.Sprintf("pool %s is complete and valid again", id))
			}
			t.reported = ""
		case t.reported == key:
		case s.condition == state.PoolInvalid:
			m.emit(s, corev1.EventTypeWarning, ReasonPoolInvalid, fmt.Sprintf("pool %s is invalid, the scheduler will not allocate from it: %s", id, s.reason))
			t.reported = key
		case s.condition == state.PoolIncomplete && now.Sub(t.since) >= m.opts.IncompleteGrace:
			m.emit(s, corev1.EventTypeWarning, ReasonPoolIncomplete, fmt.Sprintf("pool %s has been incomplete for %s, the scheduler skips it: %s",
				id, now.Sub(t.since).Round(1e9), s.reason))
			t.reported = key
		}
	}
	for id := range m.tracked {
		if !seen[id] {
			delete(m.tracked, id)
		}
	}
}

// reportRegressions emits PoolGenerationRegressed on the slice that went
// back, once per pool: a driver that keeps doing it (or a thousand pools
// doing it every second) costs one Event per pool, not one per update.
func (m *Monitor) reportRegressions(statuses []poolStatus, regressed map[pool.ID]regression) {
	if len(regressed) == 0 {
		return
	}
	for i := range statuses {
		s := &statuses[i]
		r, ok := regressed[s.usage.ID]
		t := m.tracked[s.usage.ID]
		if !ok || t == nil || t.regressionReported {
			continue
		}
		// The slice went back, so it may now be of an older generation
		// than the pool's.
		for _, sl := range append(slices.Clip(s.usage.Slices), s.usage.Older...) {
			if sl.Name != r.slice {
				continue
			}
			if m.emitOn(sl, corev1.EventTypeWarning, ReasonPoolGenerationRegressed, fmt.Sprintf(
				"pool %s went back from generation %d to %d (slice %s): generations only grow, so its driver restored an old state or shares the pool with another writer",
				s.usage.ID, r.from, r.to, r.slice)) {
				t.regressionReported = true
			}
		}
	}
}

// emit records one Event on each offending slice (for an invalid pool,
// the slices its problems name; otherwise every slice of the pool), with
// the slice's node as the related object. Only the leader emits.
func (m *Monitor) emit(s *poolStatus, eventType, reason, note string) {
	if !m.leading.Load() {
		return
	}
	names := map[string]bool{}
	if s.condition == state.PoolInvalid && s.usage.Invalid != nil {
		for _, p := range s.usage.Invalid.Problems {
			names[p.Slice] = true
		}
	}
	for _, sl := range s.usage.Slices {
		if len(names) > 0 && !names[sl.Name] {
			continue
		}
		delete(names, sl.Name)
		m.emitOn(sl, eventType, reason, note)
	}
}

// emitOn records an Event on one slice, with its node as the related
// object, if this replica leads; it reports whether it did.
func (m *Monitor) emitOn(sl *pool.Slice, eventType, reason, note string) bool {
	if !m.leading.Load() {
		return false
	}
	regarding := &resourcev1.ResourceSlice{TypeMeta: sl.TypeMeta, ObjectMeta: sl.ObjectMeta}
	regarding.APIVersion, regarding.Kind = resourcev1.SchemeGroupVersion.String(), "ResourceSlice"
	var related runtime.Object
	if sl.Spec.NodeName != nil && *sl.Spec.NodeName != "" {
		related = &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: *sl.Spec.NodeName}
	}
	m.recorder.Eventf(regarding, related, eventType, reason, "Validate", "%s", note)
	m.metrics.events.WithLabelValues(reason).Inc()
	return true
}

// trim returns the informers' transform: it drops what the monitor never
// reads before the informer stores an object, which on a large cluster is
// most of the monitor's memory: managedFields from every object, and from
// ResourceSlices what no pool check reads (live.TrimToPool: device
// attributes, about half of what a decoded MIG device holds). What the
// slices of a cluster's nodes hold alike (capacities, counter consumption,
// counter sets, device names) is kept once (live.Sharer).
func trim(sharer *live.Sharer) func(obj any) (any, error) {
	return func(obj any) (any, error) {
		if s, ok := obj.(*resourcev1.ResourceSlice); ok {
			live.TrimToPool(s)
			sharer.Share(s)
			return s, nil
		}
		if a, err := meta.Accessor(obj); err == nil {
			a.SetManagedFields(nil)
		}
		return obj, nil
	}
}
