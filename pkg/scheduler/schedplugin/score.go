package schedplugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
)

// PreScore skips Score when every node would score the same: no claim to
// allocate, or FirstFit with no firstAvailable subrequests to rank. The
// framework then calls Score for none of the nodes.
func (pl *Plugin) PreScore(ctx context.Context, cs fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s, err := readState(cs)
	if err != nil {
		return asError(klog.FromContext(ctx), err)
	}
	if s.cycle == nil && s.ext == nil || pl.cfg.strategy != allocator.BestFit && !(pl.fts.PrioritizedList && s.hasSubrequests()) {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// hasSubrequests reports whether a claim to allocate has a request with
// firstAvailable subrequests.
func (s *cycleState) hasSubrequests() bool {
	for _, i := range s.pending {
		for _, r := range s.claims[i].claim.Spec.Devices.Requests {
			if len(r.FirstAvailable) > 0 {
				return true
			}
		}
	}
	return false
}

// Score ranks a node that passed Filter. FirstFit ranks like the in-tree
// plugin: the earlier the firstAvailable subrequests the node could
// serve, the better. BestFit ranks by how used the pools the node's
// allocation draws from already are, so that pods fill partly used GPUs
// and nodes before opening empty ones.
func (pl *Plugin) Score(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := readState(cs)
	if err != nil {
		return 0, asError(klog.FromContext(ctx), err)
	}
	if s.cycle == nil && s.ext == nil {
		return 0, nil
	}
	s.mu.Lock()
	res, ok := s.results[nodeInfo.Node().Name]
	s.mu.Unlock()
	if !ok {
		return 0, nil
	}
	if pl.cfg.strategy == allocator.BestFit {
		return usedPercent(s.snap, res), nil
	}
	if !pl.fts.PrioritizedList {
		return 0, nil
	}
	return subrequestRank(s, res), nil
}

// subrequestRank adds, for every subrequest the node's allocation uses,
// how far up its request's firstAvailable list it is.
func subrequestRank(s *cycleState, res []*resourcev1.AllocationResult) int64 {
	var score int64
	for j, i := range s.pending {
		claim := s.claims[i].claim
		used := map[string]bool{}
		for _, r := range res[j].Devices.Results {
			if resourceclaim.IsSubRequestRef(r.Request) {
				used[r.Request] = true
			}
		}
		for _, req := range claim.Spec.Devices.Requests {
			for k, sub := range req.FirstAvailable {
				if used[resourceclaim.CreateSubRequestRef(req.Name, sub.Name)] {
					score += int64(resourcev1.FirstAvailableDeviceRequestMaxSize - k)
				}
			}
		}
	}
	return score
}

// usedPercent is the share of devices already in use or blocked by
// counters in the pools the allocation takes devices from, 0 to 100.
func usedPercent(snap *state.Snapshot, res []*resourcev1.AllocationResult) int64 {
	seen := map[pool.ID]bool{}
	var used, total int
	for _, a := range res {
		for _, r := range a.Devices.Results {
			id := pool.ID{Driver: r.Driver, Pool: r.Pool}
			if seen[id] {
				continue
			}
			seen[id] = true
			u := snap.Usage(id)
			if u == nil {
				continue
			}
			for k := range u.Devices {
				if u.Devices[k].InUse() || u.Devices[k].Blocked {
					used++
				}
			}
			total += len(u.Devices)
		}
	}
	if total == 0 {
		return 0
	}
	return int64(used * int(fwk.MaxNodeScore) / total)
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore scales the scores so that the best node gets
// fwk.MaxNodeScore; all zero stays all zero.
func (pl *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	var most int64
	for _, s := range scores {
		most = max(most, s.Score)
	}
	if most == 0 {
		return nil
	}
	for i := range scores {
		scores[i].Score = scores[i].Score * fwk.MaxNodeScore / most
	}
	return nil
}
