package schedplugin

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// waitlist holds the pods whose devices the State could not find and
// sends them back to the scheduling queue once the State has applied a
// change that may make room: a claim deallocated or deleted, an assumed
// allocation dropped, a slice or class added or changed.
//
// Queueing hints alone cannot do this. kube-scheduler requeues a pod when
// its own informer handlers (the claim assume cache, the slice tracker,
// the class informer) deliver an event the hints accept, while the State
// is fed by handlers of its own, in other goroutines. A pod requeued for
// a deallocation can therefore be tried before the State has applied it,
// be turned away for devices that are free by then, and wait for an event
// that has already gone by. (The in-tree plugin reads allocations from the
// handler chain the queue's events come from, so it cannot run ahead of
// them.) The waitlist closes the gap from the State's side: a pod turned
// away on a snapshot that lacks such a change is activated when the
// change is applied, or at once if it was applied before the rejection
// was recorded.
type waitlist struct {
	// activate is the framework's PodActivator: it moves pods from the
	// unschedulable pool or backoff to the active queue, and requeues a pod
	// still in its scheduling cycle when the cycle ends.
	activate func(map[string]*v1.Pod)

	// mu guards mark and pods together: a rejection is recorded against
	// the mark it read, and a change bumps the mark and activates the
	// pods that saw an older one, so neither may interleave with the
	// other. It is not the feed's lock: Filter's goroutines take it to
	// record rejections and must not wait while the feed applies a claim
	// event; the feed calls roomMade once it has let its own lock go.
	mu sync.Mutex
	// mark counts the State changes that may have made room.
	mark uint64
	pods map[types.UID]waiter
}

type waiter struct {
	pod *v1.Pod
	// seen is the mark read before the snapshot the pod was turned away
	// on: the snapshot has every change up to it, maybe later ones too.
	seen uint64
}

func newWaitlist(activate func(map[string]*v1.Pod)) *waitlist {
	return &waitlist{activate: activate, pods: map[types.UID]waiter{}}
}

// current returns the mark. A cycle reads it before taking its snapshot.
func (w *waitlist) current() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mark
}

// turnedAway records that pod did not fit on a snapshot taken after mark
// seen. If room was made since, the pod goes back to the queue now.
func (w *waitlist) turnedAway(pod *v1.Pod, seen uint64) {
	w.mu.Lock()
	if seen >= w.mark {
		w.pods[pod.UID] = waiter{pod: pod, seen: seen}
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.activate(map[string]*v1.Pod{podKey(pod): pod})
}

// drop forgets a pod: it is being tried again, or it got its devices.
// Pods deleted while waiting are dropped when room is next made (the
// queue ignores pods it does not hold).
func (w *waitlist) drop(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pods, uid)
}

// roomMade is called after the State applied a change that may let
// waiting pods fit. Every waiting pod was turned away on a snapshot that
// may lack it, so all of them go back to the queue.
func (w *waitlist) roomMade() {
	w.mu.Lock()
	w.mark++
	if len(w.pods) == 0 {
		w.mu.Unlock()
		return
	}
	pods := make(map[string]*v1.Pod, len(w.pods))
	for uid, wt := range w.pods {
		pods[podKey(wt.pod)] = wt.pod
		delete(w.pods, uid)
	}
	w.mu.Unlock()
	w.activate(pods)
}

func podKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
