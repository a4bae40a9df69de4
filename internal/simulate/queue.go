package simulate

import (
	"cmp"
	"slices"
	"time"
)

// The scheduling queue's timings are kube-scheduler's defaults
// (KubeSchedulerConfiguration podInitialBackoffSeconds,
// podMaxBackoffSeconds; the scheduler's podMaxInUnschedulablePodsDuration
// and the period of the leftover flush), with SchedulerPopFromBackoffQ on,
// as it is by default since Kubernetes 1.33.
const (
	// initialBackoff is the backoff after the first failed attempt; it
	// doubles with every further one, up to maxBackoff.
	initialBackoff = time.Second
	maxBackoff     = 10 * time.Second
	// backoffWindow: backoff expiries are truncated to whole windows, so
	// that pods whose backoff ends in the same window are ordered as the
	// active queue orders them.
	backoffWindow = time.Second
	// maxInUnschedulable: a pod that no event moved for this long is
	// retried anyway, at the next flush.
	maxInUnschedulable = 5 * time.Minute
	// flushPeriod is how often the unschedulable pods are checked for
	// maxInUnschedulable, from the scheduler's start.
	flushPeriod = 30 * time.Second
)

// backoff is how long a pod waits after its attempts-th failed attempt
// (attempts ≥ 1).
func backoff(attempts int32) time.Duration {
	if attempts <= 0 {
		return 0
	}
	shift := attempts - 1
	if shift >= 31 || initialBackoff > maxBackoff>>shift {
		return maxBackoff
	}
	return initialBackoff << shift
}

// backoffExpiry is when the backoff of a pod queued at since after
// attempts failed attempts ends, truncated to its window.
func backoffExpiry(since time.Duration, attempts int32) time.Duration {
	return (since + backoff(attempts)).Truncate(backoffWindow)
}

// backingOff says whether the pod is still backing off at now: its
// expiry is not before the window now falls in.
func backingOff(since time.Duration, attempts int32, now time.Duration) bool {
	return backoffExpiry(since, attempts) >= now.Truncate(backoffWindow)
}

// nextFlush is the first flush, at a multiple of flushPeriod, at which a
// pod queued at since has been waiting longer than maxInUnschedulable.
func nextFlush(since time.Duration) time.Duration {
	return ((since+maxInUnschedulable)/flushPeriod + 1) * flushPeriod
}

// queue is kube-scheduler's scheduling queue as a run sees it. A run's
// scheduling attempts take no simulated time: a pod that arrives is tried
// at once and, if it fits nowhere, goes to the unschedulable pool. An
// event that may free room (a departure: the DRA plugin's queueing hint
// answers Queue to every deallocation, for every pod) moves every pod of
// the pool to the active queue, or to the backoff queue if it is still
// backing off; the scheduler then pops the active queue (priority, then
// the time the pod was queued) and, once that is empty, the backoff queue
// (backoff expiry, then as the active queue), until both are empty. A pod
// that fails again goes back to the pool with one more failed attempt and
// queued at now. A flush every flushPeriod moves the pods that no event
// moved for maxInUnschedulable.
//
// Since every pod of the pool is tried at every event, the pool is kept
// as one list in the order of the pods' queueing times (ties in the order
// they were tried): the order of the last round, then the pods that
// arrived since. A round is two stable partitions of that list.
type queue struct {
	// waiting is the unschedulable pool, by queueing time.
	waiting []int32
	// attempts and since are per pod of the stream: failed attempts and
	// when the pod was last queued (kube-scheduler's Timestamp).
	attempts []int32
	since    []time.Duration
	priority []int32
	// mixed: not every pod has the same priority.
	mixed bool

	// Scratch space of a round.
	active, backoff, kept []int32
	keys                  []backoffKey
	distinct              []backoffKey
}

// backoffKey orders the backoff queue: expiry, then priority (higher
// first); pods with equal keys keep their queueing order.
type backoffKey struct {
	expiry   time.Duration
	priority int32
}

func compareBackoffKeys(a, b backoffKey) int {
	if c := cmp.Compare(a.expiry, b.expiry); c != 0 {
		return c
	}
	return cmp.Compare(b.priority, a.priority)
}

func newQueue(s *Stream) *queue {
	q := &queue{attempts: make([]int32, len(s.Pods)), since: make([]time.Duration, len(s.Pods)), priority: make([]int32, len(s.Pods))}
	for i := range s.Pods {
		q.priority[i] = s.Pods[i].Priority
		q.mixed = q.mixed || q.priority[i] != q.priority[0]
	}
	return q
}

// unschedulable puts a pod whose first attempt failed at now in the pool.
func (q *queue) unschedulable(pod int32, now time.Duration) {
	q.attempts[pod] = 1
	q.since[pod] = now
	q.waiting = append(q.waiting, pod)
}

// len is the number of pods waiting.
func (q *queue) len() int { return len(q.waiting) }

// nextFlush is the time of the next flush that moves a pod, if any pod
// waits.
func (q *queue) nextFlush() (time.Duration, bool) {
	if len(q.waiting) == 0 {
		return 0, false
	}
	return nextFlush(q.since[q.waiting[0]]), true
}

// retry moves every waiting pod and tries them in the scheduler's order;
// try places a pod or says it still does not fit. Pods placed or dropped
// (try returns true) leave the pool.
func (q *queue) retry(now time.Duration, try func(pod int32) (done bool, err error)) error {
	order := q.popOrder(now, q.waiting)
	kept, err := q.try(now, order, q.kept[:0], try)
	q.kept, q.waiting = q.waiting[:0], kept
	return err
}

// flush moves the pods that waited longer than maxInUnschedulable at now
// (a prefix of the pool) and tries them; those that fail again are queued
// at now, after the others.
func (q *queue) flush(now time.Duration, try func(pod int32) (done bool, err error)) error {
	n := 0
	for n < len(q.waiting) && now-q.since[q.waiting[n]] > maxInUnschedulable {
		n++
	}
	if n == 0 {
		return nil
	}
	order := q.popOrder(now, q.waiting[:n])
	kept := append(q.kept[:0], q.waiting[n:]...)
	kept, err := q.try(now, order, kept, try)
	q.kept, q.waiting = q.waiting[:0], kept
	return err
}

func (q *queue) try(now time.Duration, order, kept []int32, try func(int32) (bool, error)) ([]int32, error) {
	for k, pod := range order {
		done, err := try(pod)
		if err != nil {
			// The run ends with an error; keep the pool whole anyway.
			return append(kept, order[k:]...), err
		}
		if done {
			continue
		}
		q.attempts[pod]++
		q.since[pod] = now
		kept = append(kept, pod)
	}
	return kept, nil
}

// popOrder is the order in which the scheduler pops pods (in queueing
// order) moved at now: the active queue's, then the backoff queue's. The
// result is scratch space of q, valid until the next call.
func (q *queue) popOrder(now time.Duration, pods []int32) []int32 {
	active, back := q.active[:0], q.backoff[:0]
	for _, p := range pods {
		if backingOff(q.since[p], q.attempts[p], now) {
			back = append(back, p)
		} else {
			active = append(active, p)
		}
	}
	if q.mixed {
		q.keys = q.keys[:0]
		for _, p := range active {
			q.keys = append(q.keys, backoffKey{priority: q.priority[p]})
		}
		active = q.stableByKey(active)
	}
	q.keys = q.keys[:0]
	for _, p := range back {
		q.keys = append(q.keys, backoffKey{expiry: backoffExpiry(q.since[p], q.attempts[p]), priority: q.priority[p]})
	}
	back = q.stableByKey(back)
	q.active, q.backoff = active, back
	return append(active, back...)
}

// maxDistinctKeys bounds the bucket sort of stableByKey; more distinct
// keys fall back to a comparison sort.
const maxDistinctKeys = 32

// stableByKey sorts pods stably by q.keys (one per pod). A round's keys
// take few values (a backoff expiry per number of attempts, a few
// priorities), so the pods are distributed into buckets instead of
// compared: a round costs a few passes over the pool.
func (q *queue) stableByKey(pods []int32) []int32 {
	keys := q.keys
	sorted := true
	for i := 1; i < len(keys) && sorted; i++ {
		sorted = compareBackoffKeys(keys[i-1], keys[i]) <= 0
	}
	if sorted {
		return pods
	}
	distinct := q.distinct[:0]
	for _, k := range keys {
		if !slices.Contains(distinct, k) {
			distinct = append(distinct, k)
			if len(distinct) > maxDistinctKeys {
				break
			}
		}
	}
	q.distinct = distinct
	out := q.kept[:0]
	if len(distinct) > maxDistinctKeys {
		idx := make([]int, len(pods))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return compareBackoffKeys(keys[a], keys[b]) })
		for _, i := range idx {
			out = append(out, pods[i])
		}
	} else {
		slices.SortFunc(distinct, compareBackoffKeys)
		for _, d := range distinct {
			for i, k := range keys {
				if k == d {
					out = append(out, pods[i])
				}
			}
		}
	}
	// The result goes back into pods' storage; out was borrowed.
	copy(pods, out)
	q.kept = out[:0]
	return pods
}
