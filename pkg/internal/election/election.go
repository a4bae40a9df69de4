package election

import (
	"cmp"
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The durations a Config defaults to are kube-controller-manager's and
// kube-scheduler's: a replica that stops renewing loses the Lease within
// 15 s, and a holder gives up after failing to renew for 10 s, which
// leaves 5 s in which no two replicas believe they lead.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Config names the Lease that elects one replica of a component and how
// it is held. Zero fields take the defaults above; Name and Identity take
// what the caller passes to WithDefaults.
type Config struct {
	// Namespace of the Lease, required: the component's own.
	Namespace string
	// Name of the Lease.
	Name string
	// Identity of this replica; Identity() by default.
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// WithDefaults is c with every zero field set: the Lease's name to name,
// the identity to a new Identity(), the durations to the defaults.
func (c Config) WithDefaults(name string) (Config, error) {
	if c.Namespace == "" {
		return c, errors.New("leader election: the Lease's namespace must be set")
	}
	if c.Name == "" {
		c.Name = name
	}
	if c.Identity == "" {
		id, err := Identity()
		if err != nil {
			return c, err
		}
		c.Identity = id
	}
	c.LeaseDuration = cmp.Or(c.LeaseDuration, DefaultLeaseDuration)
	c.RenewDeadline = cmp.Or(c.RenewDeadline, DefaultRenewDeadline)
	c.RetryPeriod = cmp.Or(c.RetryPeriod, DefaultRetryPeriod)
	return c, nil
}

// Start competes for the Lease of c (defaults applied by the caller) until
// ctx ends: lead runs at the start of each term with a context that ends
// with the term, follow when a term ends. Losing the Lease is not fatal:
// the replica competes again, so a component keeps serving while another
// replica leads. The Lease is released when ctx ends. The returned channel
// is closed once the replica no longer competes.
func Start(ctx context.Context, client coordinationv1.LeasesGetter, c Config, lead func(context.Context), follow func()) (<-chan struct{}, error) {
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
			Client:     client,
			LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
		},
		LeaseDuration:   c.LeaseDuration,
		RenewDeadline:   c.RenewDeadline,
		RetryPeriod:     c.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            c.Name,
		Callbacks:       leaderelection.LeaderCallbacks{OnStartedLeading: lead, OnStoppedLeading: follow},
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Run returns when the Lease is lost; compete again until ctx ends.
		for ctx.Err() == nil {
			elector.Run(ctx)
		}
	}()
	return done, nil
}
