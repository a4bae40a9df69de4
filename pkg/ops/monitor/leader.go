package monitor

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/internal/election"
)

// LeaderElection configures the Lease that elects the replica that emits
// Events; its Name defaults to Component, its durations to
// kube-controller-manager's (15 s lease, 10 s renew deadline, 2 s retry).
type LeaderElection = election.Config

// RunWithLeaderElection runs the monitor until ctx ends; it emits Events
// only while it holds the Lease. Losing the Lease is not fatal: the
// replica keeps serving metrics and competes for the Lease again.
func (m *Monitor) RunWithLeaderElection(ctx context.Context, le LeaderElection) error {
	le, err := le.WithDefaults(Component)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	lease := klog.KRef(le.Namespace, le.Name)
	if _, err := election.Start(ctx, m.opts.Client.CoordinationV1(), le,
		func(context.Context) {
			logger.Info("Leading: reporting pool problems as Events", "lease", lease)
			m.SetLeading(true)
		},
		func() {
			logger.Info("Lost the lease: no longer reporting Events", "lease", lease)
			m.SetLeading(false)
		}); err != nil {
		return err
	}
	return m.Run(ctx)
}
