package schedplugin

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// bindGate holds the next scheduling cycle back while too many of the
// plugin's pods are between Reserve and the end of PreBind's writes.
//
// dractl's cycles take microseconds, so without a bound kube-scheduler
// starts the binding cycle of nearly every pending pod within a second.
// Each of them sends its writes (the nominated node, the claim's finalizer
// and status, the binding) and the API server serves them all in turn:
// nearly every pod is bound near the end, the first as late as the last.
// With a bound, the API server is as busy and pods are bound about in the
// order they were scheduled. (The in-tree plugin's cycles are slow enough
// to pace themselves.)
//
// The wait is in PreFilter, before the pod's claims are read and its
// snapshot taken, so that the cycle decides on the newest state. Permit's
// wait would come too late: the binding cycle sends the nominated-node
// patch before it waits on Permit.
//
// A pod counts for at most staleAfter. One that takes longer is held up by
// something else (another plugin's Permit, as a gang waits for its
// members; a slow PreBind; binding conditions), and waiting for it would
// stall the one scheduling loop that every profile shares.
type bindGate struct {
	limit      int
	staleAfter time.Duration
	now        func() time.Time

	// mu guards inFlight, freed and waiters: the scheduling cycle adds,
	// binding cycles (one goroutine per pod) remove. It is the gate's
	// alone: PreFilter waits on freed without holding it, and the count
	// shares nothing with the feed's or the waitlist's state.
	mu sync.Mutex
	// inFlight are the pods that passed Reserve, with when they did.
	inFlight map[types.UID]time.Time
	// freed is closed, and replaced, when a pod leaves inFlight.
	freed chan struct{}
	// waiters counts the cycles waiting (for tests).
	waiters int
}

// gateStaleAfter is how long a pod in flight holds the next cycle back.
// With the bound at its default, binding cycles end in well under a second
// even when the API server is the bottleneck.
const gateStaleAfter = 2 * time.Second

// newBindGate returns a gate for limit pods in flight, or nil (no gate) for
// a limit of zero.
func newBindGate(limit int) *bindGate {
	if limit <= 0 {
		return nil
	}
	return &bindGate{limit: limit, staleAfter: gateStaleAfter, now: time.Now,
		inFlight: map[types.UID]time.Time{}, freed: make(chan struct{})}
}

// wait returns once fewer than limit pods count as in flight, or when ctx
// ends.
func (g *bindGate) wait(ctx context.Context) {
	if g == nil {
		return
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		g.mu.Lock()
		busy, stale := g.busyLocked()
		if busy < g.limit {
			g.mu.Unlock()
			return
		}
		freed := g.freed
		g.waiters++
		g.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(stale)
		} else {
			timer.Reset(stale)
		}
		select {
		case <-freed:
		case <-timer.C:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.waiters--
		g.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// busyLocked counts the pods in flight that still hold cycles back, and
// says how soon the first of them stops.
func (g *bindGate) busyLocked() (busy int, stale time.Duration) {
	now := g.now()
	stale = g.staleAfter
	for _, since := range g.inFlight {
		left := g.staleAfter - now.Sub(since)
		if left <= 0 {
			continue
		}
		busy++
		stale = min(stale, left)
	}
	return busy, stale
}

// take records that pod passed Reserve.
func (g *bindGate) take(pod types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight[pod] = g.now()
}

// release records that pod's writes are done, or that its binding cycle
// ended. Releasing a pod not in flight does nothing.
func (g *bindGate) release(pod types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.inFlight[pod]; !ok {
		return
	}
	delete(g.inFlight, pod)
	close(g.freed)
	g.freed = make(chan struct{})
}
