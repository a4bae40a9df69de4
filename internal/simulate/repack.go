package simulate

import (
	"errors"
	"fmt"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/state"
)

// Repack is what an offline repack would reach at one moment of a run:
// every running pod of the stream placed anew, best-fit, on the cluster
// as it was at the start (claims allocated before the run stay where they
// are), in order of arrival; then the waiting pods in the queue's order.
type Repack struct {
	// Time is seconds since the start.
	Time    float64 `json:"time"`
	Running int     `json:"running"`
	Waiting int     `json:"waiting"`
	// Unplaced counts running pods the repack could not place: an online
	// placement can be luckier than a repack in arrival order.
	Unplaced int `json:"unplaced"`
	// LetIn counts the waiting pods that fit after the repack.
	LetIn int `json:"letIn"`
	// Stranded is, per counter family, the stranded share after the
	// repack, before any waiting pod is let in; StrandedNow the run's at
	// the same moment.
	Stranded    []float64 `json:"stranded"`
	StrandedNow []float64 `json:"strandedNow"`
}

// repack measures a Repack now. It builds the cluster afresh, so a run
// asks for a few (Options.Repacks), not one per sample.
func (r *run) repack(strandedNow []float64) error {
	w, err := newWorld(r.w.c, r.opts.State)
	if err != nil {
		return err
	}
	rp := Repack{Time: r.now.Seconds(), Waiting: r.queue.len(), StrandedNow: strandedNow}
	for i := range r.s.Pods {
		if r.placed[i] < 0 || r.gone[i] {
			continue
		}
		rp.Running++
		ok, err := r.placeAnew(w, i)
		if err != nil {
			return err
		}
		if !ok {
			rp.Unplaced++
		}
	}
	_, rp.Stranded = newMeter(w).measure(w)
	for _, pod := range r.queue.waiting {
		ok, err := r.placeAnew(w, int(pod))
		if err != nil {
			return err
		}
		if ok {
			rp.LetIn++
		}
	}
	r.res.Repacks = append(r.res.Repacks, rp)
	return nil
}

// placeAnew places pod i best-fit on the first node of w where its claims
// fit.
func (r *run) placeAnew(w *world, i int) (bool, error) {
	p := &r.s.Pods[i]
	for ni, node := range w.c.Nodes {
		ii := w.nodeIsland[ni]
		if ii < 0 {
			continue
		}
		isl := w.islands[ii]
		results, err := isl.st.Snapshot().Cycle(p.Claims, state.CycleOptions{Strategy: allocator.BestFit}).Allocate(r.ctx, node)
		var unfit *allocator.UnfitError
		if errors.As(err, &unfit) {
			continue
		}
		if err != nil {
			if ctxErr := r.ctx.Err(); ctxErr != nil {
				return false, ctxErr
			}
			// The allocator failed on this node in the repack as it may
			// in the run: the pod does not go there.
			continue
		}
		for k, claim := range p.Claims {
			allocated := *claim
			allocated.Status.Allocation = results[k]
			if err := isl.st.SetClaim(&allocated); err != nil {
				return false, fmt.Errorf("repack: pod %s on node %s: %w", p.Name, node.Name, err)
			}
		}
		return true, nil
	}
	return false, nil
}
