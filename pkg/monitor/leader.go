package monitor

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/internal/election"
)

// LeaderElection configures the Lease that elects the replica that emits
// Events. The durations default to kube-controller-manager's (15s lease,
// 10s renew deadline, 2s retry).
type LeaderElection struct {
	Namespace string
	// Name of the Lease; defaults to Component.
	Name string
	// Identity of this replica; election.Identity by default.
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// RunWithLeaderElection runs the monitor until ctx ends; it emits Events
// only while it holds the Lease. Losing the Lease is not fatal: the
// replica keeps serving metrics and competes for the Lease again.
func (m *Monitor) RunWithLeaderElection(ctx context.Context, le LeaderElection) error {
	if le.Name == "" {
		le.Name = Component
	}
	if le.Identity == "" {
		id, err := election.Identity()
		if err != nil {
			return err
		}
		le.Identity = id
	}
	if le.LeaseDuration == 0 {
		le.LeaseDuration = 15 * time.Second
	}
	if le.RenewDeadline == 0 {
		le.RenewDeadline = 10 * time.Second
	}
	if le.RetryPeriod == 0 {
		le.RetryPeriod = 2 * time.Second
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     m.opts.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            Component,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				klog.FromContext(ctx).Info("Leading: reporting pool problems as Events", "lease", klog.KRef(le.Namespace, le.Name))
				m.SetLeading(true)
			},
			OnStoppedLeading: func() {
				klog.FromContext(ctx).Info("Lost the lease: no longer reporting Events", "lease", klog.KRef(le.Namespace, le.Name))
				m.SetLeading(false)
			},
		},
	})
	if err != nil {
		return err
	}
	go func() {
		// Run returns when the lease is lost; compete again until ctx ends.
		for ctx.Err() == nil {
			elector.Run(ctx)
		}
	}()
	return m.Run(ctx)
}
