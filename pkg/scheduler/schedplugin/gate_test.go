package schedplugin

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// inBackground runs f, which may wait at g, and returns a channel closed
// when f returns, once f waits at g or has returned.
func inBackground(t *testing.T, g *bindGate, f func()) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-done:
			return true, nil
		default:
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.waiters > 0, nil
	})
	if err != nil {
		t.Fatal("neither waited nor returned")
	}
	return done
}

// waitInBackground runs g.wait (see inBackground).
func waitInBackground(t *testing.T, ctx context.Context, g *bindGate) <-chan struct{} {
	t.Helper()
	return inBackground(t, g, func() { g.wait(ctx) })
}

func returned(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func TestBindGate(t *testing.T) {
	ctx := context.Background()
	// The clock moves only when the test says; waits read it in their own
	// goroutines.
	var clock atomic.Int64
	g := newBindGate(2)
	g.now = func() time.Time { return time.Unix(0, clock.Load()) }
	g.staleAfter = 10 * time.Millisecond

	g.take("a")
	if done := waitInBackground(t, ctx, g); !returned(done) {
		t.Fatal("one pod in flight of two: the cycle waits")
	}
	g.take("b")
	done := waitInBackground(t, ctx, g)
	if returned(done) {
		t.Fatal("two pods in flight of two: the cycle went ahead")
	}
	g.release("nobody")
	g.release("a")
	<-done
	g.release("a") // a second release does not free b's place
	if done := waitInBackground(t, ctx, g); !returned(done) {
		t.Fatal("one pod in flight after a's release: the cycle waits")
	}

	// A pod held up past staleAfter no longer holds cycles back.
	g.take("c")
	if done := waitInBackground(t, ctx, g); returned(done) {
		t.Fatal("b and c in flight: the cycle went ahead")
	} else {
		clock.Add(int64(g.staleAfter))
		<-done // the wait's timer, set for b turning stale, fires
	}

	// The scheduler stopping ends a wait.
	g.take("d")
	g.take("e")
	cctx, cancel := context.WithCancel(ctx)
	done = waitInBackground(t, cctx, g)
	if returned(done) {
		t.Fatal("d and e in flight: the cycle went ahead")
	}
	cancel()
	<-done

	off := newBindGate(0)
	if off != nil {
		t.Fatal("a limit of zero makes a gate")
	}
	off.take("x") // a nil gate does nothing
	off.wait(ctx)
	off.release("x")
}

// TestGatePacesCycles follows the count through the plugin's phases: Reserve
// takes a place, PreBind's end or Unreserve gives it back, and a cycle
// waits in PreFilter while every place is taken.
func TestGatePacesCycles(t *testing.T) {
	objs := append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("b", 1), gpuClaim("c", 1))
	c := newCluster(t, &Args{BindingsInFlight: ptr.To[int32](1)}, objs...)
	// No pod in flight goes stale however slowly the test runs.
	now := time.Now()
	c.pl.binder.gate.now = func() time.Time { return now }
	ctx := context.Background()
	wantInFlight := func(after string, want int) {
		t.Helper()
		c.pl.binder.gate.mu.Lock()
		got := len(c.pl.binder.gate.inFlight)
		c.pl.binder.gate.mu.Unlock()
		if got != want {
			t.Fatalf("after %s %d pods in flight, want %d", after, got, want)
		}
	}
	place := func(pod *v1.Pod) (*fakeCycleState, string) {
		t.Helper()
		cs, node, statuses := schedule(t, c, pod, node1)
		if node != "node-1" {
			t.Fatalf("%s not placed: %v", pod.Name, statuses)
		}
		wantInFlight("Reserve", 1)
		return cs, node
	}

	// Unreserve gives the place back when the binding cycle fails.
	podC := gpuPod("pod-c", "c")
	csC, node := place(podC)
	c.pl.Unreserve(ctx, csC, podC, node)
	wantInFlight("Unreserve", 0)

	podA := gpuPod("pod-a", "a")
	csA, node := place(podA)
	done := inBackground(t, c.pl.binder.gate, func() { _, _ = c.pl.PreFilter(ctx, newCycleState(), gpuPod("pod-b", "b"), nil) })
	if returned(done) {
		t.Fatal("pod-b's PreFilter did not wait for pod-a's binding")
	}
	if st := c.pl.PreBind(ctx, csA, podA, node); !st.IsSuccess() {
		t.Fatalf("PreBind: %v", st)
	}
	<-done
	wantInFlight("PreBind", 0)

	// Pods without claims take no place.
	plain := &v1.Pod{}
	plain.UID = types.UID("uid-plain")
	cs := newCycleState()
	if _, st := c.pl.PreFilter(ctx, cs, plain, nil); !st.IsSkip() {
		t.Fatalf("PreFilter of a pod without claims: %v", st)
	}
	_ = c.pl.Reserve(ctx, cs, plain, "node-1")
	wantInFlight("a pod without claims", 0)
}
