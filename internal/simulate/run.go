package simulate

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/state"
)

// Options tune one run.
type Options struct {
	Strategy allocator.Strategy
	// Samples is about how many points the time series get. Zero: 200.
	Samples int
	// MaxEvents stops the run after this many events (arrivals and
	// departures). Zero: run the whole stream.
	MaxEvents int
	// Progress, if set, is called every few hundred events with the events
	// done and the most the run can have.
	Progress func(done, total int)
	// State configures every State of the run; tests fix NewShareID.
	State state.Options
	// Repacks is about how many samples also measure what an offline
	// repack would reach then (see Repack). Zero: none.
	Repacks int
}

// Reasons a pod fails that are not an allocator.Reason.
const (
	// ReasonNoMatchingDevice: no device of any node matches the requests'
	// classes and selectors.
	ReasonNoMatchingDevice = "NoMatchingDevice"
	// ReasonTooFewDevices: devices of a node match a request, fewer than
	// it asks for, and nothing else rejected them.
	ReasonTooFewDevices = "TooFewDevices"
	// ReasonTogether: every request fits alone, not all together
	// (constraints, or counters shared between the requests).
	ReasonTogether = "Together"
	// ReasonNoPools: no node of the cluster sees any pool.
	ReasonNoPools = "NoPools"
	// ReasonError: the allocator failed (an invalid pool, a CEL error).
	ReasonError = "Error"
)

// Result is one strategy's run.
type Result struct {
	Strategy string `json:"strategy"`
	// Arrived and Placed count pods; PlacedAtArrival were placed without
	// waiting; Waiting still waited at the end; Failed were dropped because
	// the allocator failed on them (an invalid pool, a CEL error);
	// Departed counts placed pods that left; Running is Placed - Departed
	// at the end.
	Arrived         int `json:"arrived"`
	Placed          int `json:"placed"`
	PlacedAtArrival int `json:"placedAtArrival"`
	Waiting         int `json:"waiting"`
	Failed          int `json:"failed"`
	Departed        int `json:"departed"`
	Running         int `json:"running"`
	Events          int `json:"events"`
	// Unschedulable counts the pods that fit on no node when they arrived
	// (they then waited); UnschedulableByReason splits them by the reason
	// of that first attempt.
	Unschedulable         int            `json:"unschedulable"`
	UnschedulableByReason map[string]int `json:"unschedulableByReason"`
	// PlacedBeforeFirstFailure is how many pods were placed before the
	// first one that did not fit on arrival: the packing measure.
	PlacedBeforeFirstFailure int `json:"placedBeforeFirstFailure"`
	// FirstFailure is the first pod that did not fit on arrival.
	FirstFailure *Failure `json:"firstFailure,omitempty"`
	// Wait is how long pods waited between arrival and placement.
	Wait           WaitStats       `json:"wait"`
	Counters       []CounterFamily `json:"counters"`
	Samples        []Sample        `json:"samples"`
	AtFirstFailure *Sample         `json:"atFirstFailure,omitempty"`
	End            Sample          `json:"end"`
	// Repacks are the offline repacks measured during the run.
	Repacks []Repack `json:"repacks,omitempty"`
	// FirstFailureView and EndView are the cluster at the first failure
	// and at the end, for pictures.
	FirstFailureView *View `json:"-"`
	EndView          *View `json:"-"`
	byReasonOrder    []string
	// placed is the island of each pod of the stream that was placed, -1
	// for the others; node is its node; placedAt when it was placed.
	placed   []int32
	node     []int32
	placedAt []time.Duration
}

// CounterFamily is one family of counters summed over the cluster (see
// render.CounterFamily), with its total capacity.
type CounterFamily struct {
	Name     string  `json:"name"`
	Capacity float64 `json:"capacity"`
}

// Sample is the cluster at one moment.
type Sample struct {
	// Time is seconds since the start.
	Time    float64 `json:"time"`
	Event   int     `json:"event"`
	Running int     `json:"running"`
	Placed  int     `json:"placed"`
	Waiting int     `json:"waiting"`
	Failed  int     `json:"failed"`
	// Utilisation is, per counter family (Result.Counters), the consumed
	// fraction of the capacity.
	Utilisation []float64 `json:"utilisation"`
	// Stranded is, per counter family, the fraction of the capacity that
	// is free but that no device still allocatable consumes: capacity no
	// request, of any size, can use any more.
	Stranded []float64 `json:"stranded"`
}

// Failure is a pod that fit on no node when it arrived.
type Failure struct {
	// Arrival is the pod's place in the stream, from 1.
	Arrival int     `json:"arrival"`
	Time    float64 `json:"time"`
	Pod     string  `json:"pod"`
	Kind    string  `json:"kind,omitempty"`
	Reason  string  `json:"reason"`
	// Summary is one line in kube-scheduler's style: "0/8 nodes fit: ...".
	Summary string `json:"summary"`
	// Explanation is the allocator's explanation for the first nodes.
	Explanation string `json:"explanation"`
}

// explainedNodes bounds the node explanations kept for a failure.
const explainedNodes = 3

type departure struct {
	at  time.Duration
	pod int
}

type departures []departure

func (d departures) Len() int { return len(d) }
func (d departures) Less(i, j int) bool {
	return d[i].at < d[j].at || d[i].at == d[j].at && d[i].pod < d[j].pod
}
func (d departures) Swap(i, j int) { d[i], d[j] = d[j], d[i] }
func (d *departures) Push(x any)   { *d = append(*d, x.(departure)) }
func (d *departures) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}

// cacheEntry remembers that a shape did not fit on a node while the
// node's island was at epoch-1, and why (nodeReason of the explanation:
// classifying a failure then costs a lookup per node, not a walk of every
// node's explanation).
type cacheEntry struct {
	epoch  uint32
	reason string
}

// shapeState is what a run knows of one shape of pod.
type shapeState struct {
	// unfit is per node: the shape did not fit there at an epoch of the
	// node's island.
	unfit []cacheEntry
	// unfitUntil, when not -1, says that the shape fit on no node before
	// the islands of run.freed[unfitUntil:] got room back: only their nodes
	// need trying. Placing a pod only takes room, so it never makes a
	// shape fit where it did not.
	unfitUntil int
}

type run struct {
	ctx   context.Context
	opts  Options
	w     *world
	s     *Stream
	res   *Result
	meter *meter
	// shapes are the stream's shapes, podShape each pod's: a retry looks
	// its shape up by index, not by name.
	shapes   []*shapeState
	podShape []int32
	placed   []int32 // island of each placed pod, -1 otherwise
	node     []int32 // node of each placed pod
	at       []time.Duration
	gone     []bool // the placed pod left
	// repackEvery: every so many samples measure a repack (0: none).
	repackEvery int
	pending     departures
	queue       *queue
	now         time.Duration
	reasons     []string // reused by arrive
	// err is a repack's error, returned when the run ends.
	err error
	// freed lists the islands that got room back (a departure), in order.
	freed []int32
	// mark and stamp dedupe the islands of freed a retry walks.
	mark       []uint32
	stamp      uint32
	candidates []int
}

// Run places the stream's pods on the cluster the way kube-scheduler
// does, with the scheduler's time taken as nil: nodes in the cluster's
// order, the first node on which the pod's claims can be allocated
// together wins, the strategy chooses the devices. A pod that fits
// nowhere waits in the scheduling queue (see queue) and is tried again
// when a pod leaves; a placed pod with a lifetime leaves after it and
// frees its devices. Departures due at an arrival's time happen first.
// After the last arrival the run goes on while pods wait and placed pods
// are still to leave, so that every pod that would be placed is (or
// after MaxEvents events).
func Run(ctx context.Context, c *Cluster, s *Stream, opts Options) (*Result, error) {
	if opts.State.Compiler == nil {
		// One compiler for every island: CEL environments are costly.
		opts.State.Compiler = allocator.NewSelectorCompiler()
	}
	w, err := newWorld(c, opts.State)
	if err != nil {
		return nil, err
	}
	return runOn(ctx, w, s, opts)
}

func runOn(ctx context.Context, w *world, s *Stream, opts Options) (*Result, error) {
	r := &run{
		ctx: ctx, opts: opts, w: w, s: s,
		res:    &Result{Strategy: strategyName(opts.Strategy), UnschedulableByReason: map[string]int{}},
		placed: make([]int32, len(s.Pods)),
		node:   make([]int32, len(s.Pods)),
		at:     make([]time.Duration, len(s.Pods)),
		gone:   make([]bool, len(s.Pods)),
		queue:  newQueue(s),
		mark:   make([]uint32, len(w.islands)),
	}
	for i := range r.placed {
		r.placed[i], r.node[i], r.at[i] = -1, -1, -1
	}
	r.podShape = make([]int32, len(s.Pods))
	ids := map[string]int32{}
	for i := range s.Pods {
		id, ok := ids[s.Pods[i].shape]
		if !ok {
			id = int32(len(r.shapes))
			ids[s.Pods[i].shape] = id
			r.shapes = append(r.shapes, &shapeState{unfit: make([]cacheEntry, len(w.c.Nodes)), unfitUntil: -1})
		}
		r.podShape[i] = id
	}
	r.meter = newMeter(w)
	r.res.Counters = r.meter.families
	total := len(s.Pods)
	for _, p := range s.Pods {
		if p.Lifetime > 0 {
			total++
		}
	}
	if opts.MaxEvents > 0 {
		total = min(total, opts.MaxEvents)
	}
	samples := opts.Samples
	if samples <= 0 {
		samples = 200
	}
	every := max(1, total/samples)
	if opts.Repacks > 0 {
		r.repackEvery = max(1, samples/opts.Repacks)
	}
	r.sample()
	next := 0
	for {
		if opts.MaxEvents > 0 && r.res.Events >= opts.MaxEvents {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		arrival, leaving := next < len(s.Pods), r.pending.Len() > 0
		if !arrival && (!leaving || r.queue.len() == 0) {
			// Nothing arrives any more, and nothing that waits can
			// get room.
			break
		}
		at := time.Duration(math.MaxInt64)
		if arrival {
			at = s.Pods[next].Arrive
		}
		if leaving {
			at = min(at, r.pending[0].at)
		}
		if flush, ok := r.queue.nextFlush(); ok && flush < at {
			r.now = flush
			if err := r.queue.flush(r.now, r.retry); err != nil {
				return nil, err
			}
			continue
		}
		if leaving && (!arrival || r.pending[0].at <= s.Pods[next].Arrive) {
			d := heap.Pop(&r.pending).(departure)
			r.now = d.at
			if err := r.depart(d.pod); err != nil {
				return nil, err
			}
			if err := r.queue.retry(r.now, r.retry); err != nil {
				return nil, err
			}
		} else {
			r.now = s.Pods[next].Arrive
			if err := r.arrive(next); err != nil {
				return nil, err
			}
			next++
		}
		r.res.Events++
		if r.res.Events%every == 0 {
			r.sample()
		}
		if opts.Progress != nil && r.res.Events%256 == 0 {
			opts.Progress(r.res.Events, total)
		}
	}
	if opts.Progress != nil {
		opts.Progress(r.res.Events, total)
	}
	if n := len(r.res.Samples); n == 0 || r.res.Samples[n-1].Event != r.res.Events || r.res.Samples[n-1].Time != r.now.Seconds() {
		r.sample()
	}
	if r.err != nil {
		return nil, r.err
	}
	r.res.End = r.res.Samples[len(r.res.Samples)-1]
	r.res.Running = r.res.Placed - r.res.Departed
	r.res.Waiting = r.queue.len()
	r.res.EndView = r.view()
	r.res.placed, r.res.node, r.res.placedAt = r.placed, r.node, r.at
	if r.res.FirstFailure == nil {
		r.res.PlacedBeforeFirstFailure = r.res.Placed
	}
	r.res.Wait = waitStats(s, r.at, r.res.Arrived)
	return r.res, nil
}

func strategyName(s allocator.Strategy) string {
	switch s {
	case allocator.FirstFit:
		return "first-fit"
	case allocator.BestFit:
		return "best-fit"
	}
	return s.String()
}

func (r *run) sample() {
	util, stranded := r.meter.measure(r.w)
	r.res.Samples = append(r.res.Samples, Sample{
		Time: r.now.Seconds(), Event: r.res.Events, Running: r.res.Placed - r.res.Departed,
		Placed: r.res.Placed, Waiting: r.queue.len(), Failed: r.res.Failed, Utilisation: util, Stranded: stranded,
	})
	if r.repackEvery > 0 && len(r.res.Samples)%r.repackEvery == 0 && r.err == nil {
		// A sample cannot fail; a repack's error ends the run at its end.
		r.err = r.repack(stranded)
	}
}

// outcome of trying a pod on one node.
type outcome int

const (
	unfit outcome = iota
	fit
	failed // the allocator failed: the pod can never be placed
)

// tryNode allocates the pod's claims on node ni and records the
// allocation if they fit. A failure other than "does not fit" is
// returned with failed; only a cancelled context is an error.
func (r *run) tryNode(i int, sh *shapeState, ni int) (outcome, error, error) {
	p := &r.s.Pods[i]
	ii := r.w.nodeIsland[ni]
	isl := r.w.islands[ii]
	if e := &sh.unfit[ni]; e.epoch == isl.epoch+1 {
		return unfit, nil, nil
	}
	node := r.w.c.Nodes[ni]
	results, err := isl.st.Snapshot().Cycle(p.Claims, state.CycleOptions{Strategy: r.opts.Strategy}).Allocate(r.ctx, node)
	var unfitErr *allocator.UnfitError
	if errors.As(err, &unfitErr) {
		sh.unfit[ni] = cacheEntry{epoch: isl.epoch + 1, reason: nodeReason(unfitErr.Explanation)}
		return unfit, nil, nil
	}
	if err != nil {
		if ctxErr := r.ctx.Err(); ctxErr != nil {
			return failed, nil, ctxErr
		}
		return failed, err, nil
	}
	for k, claim := range p.Claims {
		allocated := *claim
		allocated.Status.Allocation = results[k]
		if err := isl.st.SetClaim(&allocated); err != nil {
			return failed, nil, fmt.Errorf("pod %s: recording the allocation on node %s: %w", p.Name, node.Name, err)
		}
	}
	r.placed[i], r.node[i], r.at[i] = int32(ii), int32(ni), r.now
	r.res.Placed++
	if p.Lifetime > 0 {
		heap.Push(&r.pending, departure{at: r.now + p.Lifetime, pod: i})
	}
	return fit, nil, nil
}

func (r *run) arrive(i int) error {
	p := &r.s.Pods[i]
	r.res.Arrived++
	sh := r.shapes[r.podShape[i]]
	reasons := r.reasons[:0]
	defer func() { r.reasons = reasons[:0] }()
	for ni := range r.w.c.Nodes {
		if r.w.nodeIsland[ni] < 0 {
			continue
		}
		o, allocErr, err := r.tryNode(i, sh, ni)
		switch {
		case err != nil:
			return err
		case o == fit:
			r.res.PlacedAtArrival++
			return nil
		case o == failed:
			node := r.w.c.Nodes[ni]
			r.unschedulable(p, ReasonError, fmt.Sprintf("0/%d nodes fit: node %s: %v", len(r.w.c.Nodes), node.Name, allocErr), allocErr.Error())
			r.res.Failed++
			return nil
		}
		reasons = append(reasons, sh.unfit[ni].reason)
	}
	sh.unfitUntil = len(r.freed)
	reason, summary := classify(reasons, len(r.w.c.Nodes))
	explanation := ""
	if r.res.FirstFailure == nil {
		explanation = r.explain(p, len(reasons))
	}
	r.queue.unschedulable(int32(i), r.now)
	r.unschedulable(p, reason, summary, explanation)
	return nil
}

// retry tries a waiting pod again: on the nodes of the islands that got
// room back since its shape last fit nowhere, or on every node. done: the
// pod was placed or dropped.
func (r *run) retry(pod int32) (bool, error) {
	i := int(pod)
	sh := r.shapes[r.podShape[i]]
	if sh.unfitUntil == len(r.freed) {
		return false, nil
	}
	nodes := r.candidates[:0]
	if sh.unfitUntil >= 0 && len(r.freed)-sh.unfitUntil <= len(r.w.islands)/4 {
		r.stamp++
		for _, ii := range r.freed[sh.unfitUntil:] {
			if r.mark[ii] != r.stamp {
				r.mark[ii] = r.stamp
				nodes = append(nodes, r.w.islands[ii].nodes...)
			}
		}
		slices.Sort(nodes)
	} else {
		for ni := range r.w.c.Nodes {
			if r.w.nodeIsland[ni] >= 0 {
				nodes = append(nodes, ni)
			}
		}
	}
	r.candidates = nodes
	for _, ni := range nodes {
		o, _, err := r.tryNode(i, sh, ni)
		switch {
		case err != nil:
			return false, err
		case o == fit:
			return true, nil
		case o == failed:
			// The allocator failed on a node that other pods of the
			// shape found full: it would fail again, drop the pod.
			r.res.Failed++
			return true, nil
		}
	}
	sh.unfitUntil = len(r.freed)
	return false, nil
}

// explain explains the failure of p on the first nodes afresh: cached
// explanations name the claims of an earlier pod of the same shape.
func (r *run) explain(p *Pod, failed int) string {
	var b strings.Builder
	shown := 0
	for ni, node := range r.w.c.Nodes {
		if shown == explainedNodes {
			break
		}
		ii := r.w.nodeIsland[ni]
		if ii < 0 {
			continue
		}
		_, err := r.w.islands[ii].st.Snapshot().Cycle(p.Claims, state.CycleOptions{Strategy: r.opts.Strategy}).Allocate(r.ctx, node)
		var unfit *allocator.UnfitError
		if errors.As(err, &unfit) {
			b.WriteString(unfit.Explanation.String())
			shown++
		}
	}
	if failed > shown {
		fmt.Fprintf(&b, "... and %d more nodes\n", failed-shown)
	}
	return b.String()
}

// unschedulable records a pod that fit on no node when it arrived.
func (r *run) unschedulable(p *Pod, reason, summary, explanation string) {
	r.res.Unschedulable++
	if _, ok := r.res.UnschedulableByReason[reason]; !ok {
		r.res.byReasonOrder = append(r.res.byReasonOrder, reason)
	}
	r.res.UnschedulableByReason[reason]++
	if r.res.FirstFailure != nil {
		return
	}
	r.res.PlacedBeforeFirstFailure = r.res.Placed
	r.res.FirstFailure = &Failure{
		Arrival: r.res.Arrived, Time: r.now.Seconds(), Pod: p.Name.String(), Kind: p.Kind,
		Reason: reason, Summary: summary, Explanation: explanation,
	}
	r.sample()
	at := r.res.Samples[len(r.res.Samples)-1]
	r.res.AtFirstFailure = &at
	r.res.FirstFailureView = r.view()
}

func (r *run) depart(i int) error {
	p := &r.s.Pods[i]
	isl := r.w.islands[r.placed[i]]
	for _, c := range p.Claims {
		if err := isl.st.DeleteClaim(c.Namespace, c.Name); err != nil {
			return fmt.Errorf("pod %s leaves: %w", p.Name, err)
		}
	}
	isl.epoch++
	r.freed = append(r.freed, r.placed[i])
	r.gone[i] = true
	r.res.Departed++
	return nil
}

// classify names why a pod fit on no node from each node's reason (see
// nodeReason): the pod gets the most common one.
func classify(nodeReasons []string, nodes int) (string, string) {
	if len(nodeReasons) == 0 {
		return ReasonNoPools, fmt.Sprintf("0/%d nodes fit: no node sees any resource pool", nodes)
	}
	count := map[string]int{}
	for _, r := range nodeReasons {
		count[r]++
	}
	reasons := make([]string, 0, len(count))
	for k := range count {
		reasons = append(reasons, k)
	}
	slices.SortFunc(reasons, func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(reasons))
	for i, k := range reasons {
		parts[i] = fmt.Sprintf("%d %s", count[k], k)
	}
	return reasons[0], fmt.Sprintf("0/%d nodes fit: %s", nodes, strings.Join(parts, ", "))
}

// nodeReason is the reason that rejected most devices of a request that
// cannot be satisfied on the node (class and selector mismatches aside:
// they only say the device is of another kind).
func nodeReason(e *allocator.Explanation) string {
	counts := map[allocator.Reason]int{}
	unsatisfiable, tooFew := false, false
	for _, c := range e.Claims {
		for _, rq := range c.Requests {
			if rq.SatisfiableAlone {
				continue
			}
			unsatisfiable = true
			tooFew = tooFew || rq.Candidates > 0 && rq.Candidates < rq.Needed
			for reason, n := range rq.Rejected {
				if reason != allocator.ReasonDriverOrClass && reason != allocator.ReasonSelector {
					counts[reason] += n
				}
			}
		}
	}
	if !unsatisfiable {
		return ReasonTogether
	}
	// Allocated is checked before the selectors, so it counts held
	// devices of every kind; it is the reason only when nothing else
	// rejected a device that matched.
	best, bestN := allocator.Reason(0), 0
	for reason, n := range counts {
		if reason != allocator.ReasonAllocated && (n > bestN || n == bestN && reason < best) {
			best, bestN = reason, n
		}
	}
	switch {
	case bestN > 0:
		return best.String()
	case counts[allocator.ReasonAllocated] > 0:
		return allocator.ReasonAllocated.String()
	case tooFew:
		return ReasonTooFewDevices
	}
	return ReasonNoMatchingDevice
}

// Reasons lists the reasons pods were unschedulable on arrival in the run, most frequent first.
func (r *Result) Reasons() []string {
	out := slices.Clone(r.byReasonOrder)
	slices.SortStableFunc(out, func(a, b string) int { return r.UnschedulableByReason[b] - r.UnschedulableByReason[a] })
	return out
}
