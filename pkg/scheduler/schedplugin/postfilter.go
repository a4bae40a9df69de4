package schedplugin

import (
	"context"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/podclaims"
)

// PostFilter runs when no node fits. Like the in-tree plugin it
// deallocates one allocated claim that some node could not use and that
// no other pod holds, so that the next attempt can allocate it anew.
// Otherwise it adds dractl's count, per claim, of what stopped the nodes.
func (pl *Plugin) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := readState(cs)
	if err != nil || len(s.claims) == 0 && s.ext == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if s.cycle != nil || s.ext != nil {
		pl.countPending(pod, s, OutcomeUnschedulable, s.ext != nil)
	}
	if s.stale != nil {
		if err := pl.binder.deleteClaim(ctx, s.stale); err != nil {
			return nil, asError(klog.FromContext(ctx), err)
		}
		return nil, fwk.NewStatus(fwk.Unschedulable, reasonDeletedStale)
	}
	if found, st := pl.deallocateUnavailable(ctx, pod, s); found {
		return nil, st
	}
	account := s.account()
	if account == "" {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if pl.cfg.inline {
		return nil, fwk.NewStatus(fwk.Unschedulable, "dractl: "+account)
	}
	// The in-tree plugin adds nothing to the pod's condition here; the
	// account goes beside it, where kubectl describe pod shows it.
	pl.recordAccount(pod, account)
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// account is dractl's count, per claim, of what stopped the nodes the
// cycle rejected; empty when it rejected none.
func (s *cycleState) account() string {
	if len(s.rejected) == 0 {
		return ""
	}
	order := make([]string, len(s.claims), len(s.claims)+1)
	for i, pc := range s.claims {
		order[i] = pc.name
	}
	if s.ext != nil {
		order = append(order, podclaims.ExtendedEntryName)
	}
	return summary(order, s.rejected, s.invalid)
}

// recordAccount records the account as an Event of the pod.
func (pl *Plugin) recordAccount(pod *v1.Pod, account string) {
	if rec := pl.fh.EventRecorder(); rec != nil {
		rec.Eventf(pod, nil, v1.EventTypeWarning, eventReason, "Scheduling", "%s", truncateNote(account))
	}
}

// deallocateUnavailable deallocates one of the pod's allocated claims
// that some node could not use and that is reserved for nobody or for the
// pod alone, and reports whether it found one.
func (pl *Plugin) deallocateUnavailable(ctx context.Context, pod *v1.Pod, s *cycleState) (bool, *fwk.Status) {
	logger := klog.FromContext(ctx)
	for i := range s.claims {
		if !s.unavailable[i] {
			continue
		}
		c := s.claims[i].claim
		rf := c.Status.ReservedFor
		if c.Status.Allocation == nil || len(rf) > 1 || (len(rf) == 1 && rf[0].UID != pod.UID) {
			// Not written yet (shared in a pod group cycle), or held by
			// others too.
			continue
		}
		logger.V(5).Info("Deallocating ResourceClaim", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(c))
		if err := pl.binder.deallocate(ctx, c); err != nil {
			return true, asError(logger, err)
		}
		return true, fwk.NewStatus(fwk.Unschedulable, reasonDeallocated)
	}
	return false, nil
}

// maxNote is events.k8s.io/v1's limit on an Event's note.
const maxNote = 1024

// truncateNote keeps an Event's note within the API's limit, marking a cut.
func truncateNote(s string) string {
	if len(s) <= maxNote {
		return s
	}
	const more = " ..."
	cut := maxNote - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
