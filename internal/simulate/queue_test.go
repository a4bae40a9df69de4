package simulate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/state"
)

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempts int32
		want     time.Duration
	}{
		{0, 0}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second},
		{5, 10 * time.Second}, {6, 10 * time.Second}, {40, 10 * time.Second},
	} {
		if got := backoff(tc.attempts); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.attempts, got, tc.want)
		}
	}
}

func TestBackingOff(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name     string
		since    time.Duration
		attempts int32
		now      time.Duration
		want     bool
	}{
		{"just failed", 10 * s, 1, 10 * s, true},
		// Expiry 11.5s truncates to 11s, which is the window of 11.2s:
		// a pod is backing off until its window is over.
		{"in the expiry's window", 10*s + s/2, 1, 11*s + s/5, true},
		{"window after the expiry", 10*s + s/2, 1, 12 * s, false},
		{"doubled", 10 * s, 3, 13 * s, true},
		{"doubled, over", 10 * s, 3, 15 * s, false},
		{"capped", 10 * s, 9, 20 * s, true},
		{"capped, over", 10 * s, 9, 21 * s, false},
	} {
		if got := backingOff(tc.since, tc.attempts, tc.now); got != tc.want {
			t.Errorf("%s: backingOff(%v, %d, %v) = %v, want %v", tc.name, tc.since, tc.attempts, tc.now, got, tc.want)
		}
	}
}

func TestNextFlush(t *testing.T) {
	s := time.Second
	for _, tc := range []struct{ since, want time.Duration }{
		{0, 330 * s},       // 300s after is not longer than 5 minutes
		{1, 330 * s},       // at 330s it is
		{29 * s, 330 * s},  // 301s
		{30 * s, 360 * s},  // 330s would be exactly 5 minutes
		{31 * s, 360 * s},  // 329s at 360s
		{299 * s, 600 * s}, // 301s
	} {
		if got := nextFlush(tc.since); got != tc.want {
			t.Errorf("nextFlush(%v) = %v, want %v", tc.since, got, tc.want)
		}
	}
}

// TestPopOrder: pods not backing off come first, by priority then
// queueing order; then the backing-off ones by expiry, priority,
// queueing order.
func TestPopOrder(t *testing.T) {
	s := time.Second
	pods := []struct {
		since    time.Duration
		attempts int32
		priority int32
	}{
		0: {0, 9, 0},       // expiry 10s: not backing off at 20s
		1: {15 * s, 9, 0},  // expiry 25s
		2: {0, 9, 5},       // not backing off, higher priority
		3: {19 * s, 1, 0},  // expiry 20s: backing off in 20s's window
		4: {15 * s, 9, 5},  // expiry 25s, higher priority
		5: {16 * s, 9, 0},  // expiry 26s
		6: {5 * s, 9, 0},   // not backing off
		7: {19 * s, 2, -1}, // expiry 21s
	}
	q := &queue{attempts: make([]int32, len(pods)), since: make([]time.Duration, len(pods)), priority: make([]int32, len(pods)), mixed: true}
	var waiting []int32
	for i, p := range pods {
		q.attempts[i], q.since[i], q.priority[i] = p.attempts, p.since, p.priority
		waiting = append(waiting, int32(i))
	}
	got := slices.Clone(q.popOrder(20*s, waiting))
	want := []int32{2, 0, 6, 3, 7, 4, 1, 5}
	if !slices.Equal(got, want) {
		t.Errorf("pop order %v, want %v", got, want)
	}
}

// TestQueueAgainstTwin is the queue's property: a run places every pod on
// the node and at the time that kube-scheduler's queue, written out
// literally (twinRun: three queues, every waiting pod moved at every
// departure, every node tried at every attempt on one State of the whole
// cluster), places it; and the same pods wait at the end. Priorities are
// random, so that the queue's order matters.
// The second kind of run has pods living hours on one node, so that
// departures are rarer than the flush of pods waiting 5 minutes.
func TestQueueAgainstTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 0))
	flushed := 0
	for seed := range int64(6) {
		c := dgxCluster(3)
		s := mustStream(t, migWorkload(seed, 250, 6*time.Second, 12*time.Minute))
		if seed >= 4 {
			c = dgxCluster(1)
			s = mustStream(t, migWorkload(seed, 120, 20*time.Second, 3*time.Hour))
		}
		if seed%2 == 1 {
			for i := range s.Pods {
				s.Pods[i].Priority = int32(r.IntN(3))
			}
		}
		for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
			name := fmt.Sprintf("seed %d %s", seed, strategyName(strategy))
			res, err := Run(context.Background(), c, s, Options{Strategy: strategy, State: fixedShareIDs()})
			if err != nil {
				t.Fatal(err)
			}
			node, at, waiting, flushes := twinRun(t, c, s, strategy)
			flushed += flushes
			waited := 0
			for i := range s.Pods {
				if res.node[i] != node[i] || res.placedAt[i] != at[i] {
					t.Fatalf("%s: pod %s placed on node %d at %v, the twin places it on %d at %v", name, s.Pods[i].Name, res.node[i], res.placedAt[i], node[i], at[i])
				}
				if at[i] > s.Pods[i].Arrive {
					waited++
				}
			}
			if res.Waiting != waiting {
				t.Fatalf("%s: %d pods wait at the end, the twin has %d", name, res.Waiting, waiting)
			}
			if waited < 20 || res.Wait.Waited != waited {
				t.Fatalf("%s: %d pods waited (reported %d); the queue is not exercised", name, waited, res.Wait.Waited)
			}
		}
	}
	if flushed == 0 {
		t.Fatal("no pod was flushed from the unschedulable pool; the flush is not exercised")
	}
}

type twinPod struct {
	pod      int
	attempts int32
	since    time.Duration
	seq      int
}

// twinRun is the reference: what kube-scheduler's queue does, with no
// shortcut. It returns each pod's node and placement time (-1 if never
// placed), how many pods wait at the end and how many were flushed.
func twinRun(t *testing.T, c *Cluster, s *Stream, strategy allocator.Strategy) ([]int32, []time.Duration, int, int) {
	t.Helper()
	full := state.New(fixedShareIDs())
	for _, sl := range c.Slices {
		coretest.Must(t, full.SetMixinSlice(sl))
	}
	for _, dc := range c.Classes {
		coretest.Must(t, full.SetClass(dc))
	}
	node := make([]int32, len(s.Pods))
	at := make([]time.Duration, len(s.Pods))
	for i := range node {
		node[i], at[i] = -1, -1
	}
	var active, back, pool []*twinPod
	seq := 0
	type leave struct {
		at  time.Duration
		pod int
	}
	var leaving []leave
	prio := func(p *twinPod) int32 { return s.Pods[p.pod].Priority }
	activeLess := func(a, b *twinPod) bool {
		if prio(a) != prio(b) {
			return prio(a) > prio(b)
		}
		return a.since < b.since || a.since == b.since && a.seq < b.seq
	}
	expiry := func(p *twinPod) time.Duration {
		d := time.Second
		for range p.attempts - 1 {
			if d *= 2; d >= 10*time.Second {
				d = 10 * time.Second
				break
			}
		}
		return (p.since + d).Truncate(time.Second)
	}
	backLess := func(a, b *twinPod) bool {
		if expiry(a) != expiry(b) {
			return expiry(a) < expiry(b)
		}
		return activeLess(a, b)
	}
	popMin := func(q *[]*twinPod, less func(a, b *twinPod) bool) *twinPod {
		best := 0
		for i := range *q {
			if less((*q)[i], (*q)[best]) {
				best = i
			}
		}
		p := (*q)[best]
		*q = slices.Delete(*q, best, best+1)
		return p
	}
	attempt := func(p *twinPod, now time.Duration) {
		pod := &s.Pods[p.pod]
		for ni, n := range c.Nodes {
			res, err := full.Snapshot().Cycle(pod.Claims, state.CycleOptions{Strategy: strategy}).Allocate(context.Background(), n)
			var unfit *allocator.UnfitError
			if errors.As(err, &unfit) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, cl := range pod.Claims {
				cp := *cl
				cp.Status.Allocation = res[k]
				coretest.Must(t, full.SetClaim(&cp))
			}
			node[p.pod], at[p.pod] = int32(ni), now
			if pod.Lifetime > 0 {
				leaving = append(leaving, leave{now + pod.Lifetime, p.pod})
			}
			return
		}
		p.attempts++
		p.since, p.seq = now, seq
		seq++
		pool = append(pool, p)
	}
	schedule := func(now time.Duration) {
		for len(active)+len(back) > 0 {
			if len(active) > 0 {
				attempt(popMin(&active, activeLess), now)
			} else {
				attempt(popMin(&back, backLess), now)
			}
		}
	}
	move := func(now time.Duration, which func(*twinPod) bool) {
		var stay []*twinPod
		for _, p := range pool {
			switch {
			case !which(p):
				stay = append(stay, p)
			case expiry(p) >= now.Truncate(time.Second):
				back = append(back, p)
			default:
				active = append(active, p)
			}
		}
		pool = stay
		schedule(now)
	}
	next, flushes := 0, 0
	var tick time.Duration
	for {
		slices.SortFunc(leaving, func(a, b leave) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			return a.pod - b.pod
		})
		if next == len(s.Pods) && (len(leaving) == 0 || len(pool) == 0) {
			break
		}
		upcoming := time.Duration(1 << 62)
		if next < len(s.Pods) {
			upcoming = s.Pods[next].Arrive
		}
		if len(leaving) > 0 {
			upcoming = min(upcoming, leaving[0].at)
		}
		if tick < upcoming {
			move(tick, func(p *twinPod) bool {
				if tick-p.since > 5*time.Minute {
					flushes++
					return true
				}
				return false
			})
			tick += 30 * time.Second
			continue
		}
		if len(leaving) > 0 && (next == len(s.Pods) || leaving[0].at <= s.Pods[next].Arrive) {
			l := leaving[0]
			leaving = leaving[1:]
			for _, cl := range s.Pods[l.pod].Claims {
				coretest.Must(t, full.DeleteClaim(cl.Namespace, cl.Name))
			}
			move(l.at, func(*twinPod) bool { return true })
			continue
		}
		p := &twinPod{pod: next, since: s.Pods[next].Arrive, seq: seq}
		seq++
		active = append(active, p)
		schedule(s.Pods[next].Arrive)
		next++
	}
	return node, at, len(pool), flushes
}
