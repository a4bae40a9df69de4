package publish

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/internal/election"
)

// LeaderElection configures the Lease that elects the replica of a
// control-plane publisher that publishes. Namespace is required; Name
// defaults to "<driver name>-publisher", the durations to
// kube-controller-manager's (15 s lease, 10 s renew deadline, 2 s retry).
type LeaderElection = election.Config

// ControllerOptions configure a Controller.
type ControllerOptions struct {
	DriverName     string
	KubeClient     kubernetes.Interface
	LeaderElection LeaderElection
	// SyncDelay is how long the leader waits after a slice of its pools
	// changed before it reconciles them again (removing those of pools
	// no longer described among them); the ResourceSlice controller's
	// 30 s when zero.
	SyncDelay time.Duration
	// Server is the kube-apiserver the pools are published to;
	// StartController reads it from KubeClient's discovery when nil
	// (ReadServer).
	Server *Server
}

// Controller publishes the pools of a driver that no node owns —
// network-attached devices, a multi-host TPU block with
// perDeviceNodeSelection, devices every node sees — from the control
// plane, as KEP-4815 has them published. Replicas of a Deployment run one
// each; the one holding the Lease publishes, the others wait to take
// over. A node's own devices are the kubelet plugin's (driverkit.Start).
type Controller struct {
	opts ControllerOptions

	mu        sync.Mutex
	published *Published
	slices    *resourceslice.Controller // while leading
	leading   chan struct{}             // closed when this replica first leads
	done      <-chan struct{}           // closed when the replica no longer competes
}

// StartController reads the kube-apiserver once (ReadServer, unless
// opts.Server is given), validates the pool description as
// BuildCentralFor does for it (an invalid one is refused before competing
// for the Lease) and
// publishes it whenever this replica leads, until ctx ends. Slices of
// pools no longer described are deleted by the leader; slices of the
// driver's nodes (nodeName set) are never touched.
func StartController(ctx context.Context, opts ControllerOptions, pool []*api.ResourceSlice) (*Controller, error) {
	if opts.DriverName == "" || opts.KubeClient == nil || opts.LeaderElection.Namespace == "" {
		return nil, errors.New("publish: DriverName, KubeClient and LeaderElection.Namespace must be set")
	}
	if opts.Server == nil {
		var err error
		if opts.Server, err = ReadServer(opts.KubeClient.Discovery()); err != nil {
			return nil, err
		}
	}
	opts.Server.Log(klog.FromContext(ctx))
	published, err := BuildCentralFor(opts.Server, opts.DriverName, pool)
	if err != nil {
		return nil, err
	}
	le, err := opts.LeaderElection.WithDefaults(opts.DriverName + "-publisher")
	if err != nil {
		return nil, err
	}
	opts.LeaderElection = le

	c := &Controller{opts: opts, published: published, leading: make(chan struct{})}
	logger := klog.FromContext(ctx)
	lease := klog.KRef(le.Namespace, le.Name)
	var once sync.Once
	c.done, err = election.Start(ctx, opts.KubeClient.CoordinationV1(), le,
		func(leadCtx context.Context) {
			logger.Info("Leading: publishing the pools no node owns", "lease", lease, "identity", le.Identity)
			if err := c.lead(leadCtx); err != nil {
				logger.Error(err, "Starting the ResourceSlice controller")
				return
			}
			once.Do(func() { close(c.leading) })
		},
		func() {
			logger.Info("Not leading: another replica publishes", "lease", lease, "identity", le.Identity)
			c.follow()
		})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// lead starts the ResourceSlice controller for the current pools; it
// stops with ctx, the leading term.
func (c *Controller) lead(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	opts := resourceslice.Options{
		DriverName: c.opts.DriverName, KubeClient: c.opts.KubeClient,
		Resources: c.published.Resources.DeepCopy(),
	}
	if c.opts.SyncDelay != 0 {
		opts.SyncDelay = &c.opts.SyncDelay
	}
	ctrl, err := resourceslice.StartController(ctx, opts)
	if err != nil {
		return err
	}
	c.slices = ctrl
	return nil
}

func (c *Controller) follow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slices != nil {
		c.slices.Stop()
		c.slices = nil
	}
}

// Leading is closed once this replica has led, and published, for the
// first time.
func (c *Controller) Leading() <-chan struct{} { return c.leading }

// Publish replaces the pools. An invalid description is refused and the
// previous pools stay published; a replica not leading publishes the new
// ones when it leads.
func (c *Controller) Publish(pool []*api.ResourceSlice) error {
	published, err := BuildCentralFor(c.opts.Server, c.opts.DriverName, pool)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.published = published
	if c.slices != nil {
		c.slices.Update(published.Resources.DeepCopy())
	}
	return nil
}

// Published is what the controller publishes while it leads.
func (c *Controller) Published() *Published {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.published
}

// Wait returns once the controller has stopped competing for the Lease
// (after ctx ended and the Lease was released).
func (c *Controller) Wait() { <-c.done }
