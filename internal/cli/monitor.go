package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/dractl/dractl/pkg/ops/delegatedauth"
	"github.com/dractl/dractl/pkg/ops/monitor"
)

type monitorOptions struct {
	*inputOptions
	cluster     *clusterOptions
	bind        string
	leaderElect bool
	leaseNS     string
	grace       time.Duration
	metricsAuth bool
	auth        *delegatedauth.Options
}

func newMonitorCommand(g *inputOptions) *cobra.Command {
	o := &monitorOptions{inputOptions: g, auth: delegatedauth.NewOptions()}
	cmd := &cobra.Command{
		Use:   "monitor",
		Short: "Watch the cluster's resource pools: Events on problems, Prometheus metrics",
		Long: `monitor is a controller: it watches ResourceSlices and ResourceClaims and
checks every pool as the scheduler would. When a pool becomes invalid, or
stays incomplete longer than --incomplete-grace, it records an
events.k8s.io/v1 Event (reason PoolInvalid or PoolIncomplete) on the
offending ResourceSlices, with their Node as the related object, and a
PoolRecovered Event when the pool is whole again. Devices that get a
NoSchedule or NoExecute taint (a driver's health taint, say) are a
DeviceTainted Event on their slice, DeviceUntainted when it goes.

It serves on --metrics-bind-address:
  /metrics  Prometheus metrics: dractl_pools{condition},
            dractl_pool_condition, dractl_pool_devices,
            dractl_pool_devices_allocated, dractl_pool_counter_capacity,
            dractl_pool_counter_consumed, dractl_pool_validation_errors
  /healthz  the process runs
  /readyz   the informers have synced

With --metrics-auth it serves them over HTTPS, and /metrics only to
requests kube-apiserver authenticates (a bearer token by TokenReview, a
client certificate by the cluster's client CA) and authorizes (a
SubjectAccessReview of "get" on the non-resource URL /metrics), as
kube-scheduler and kube-controller-manager serve theirs. The probes stay
open. Its identity then needs the system:auth-delegator ClusterRole and
the extension-apiserver-authentication-reader Role in kube-system; out of
a cluster, the reviews go through --kubeconfig, which must then be given.

With --leader-elect (the default) replicas share a Lease in
--leader-elect-namespace and only the holder records Events; every
replica serves metrics. deploy/monitor/ runs it in a cluster with the
least privileges it needs. It runs until SIGINT or SIGTERM.`,
		Example: `  dractl monitor --kubeconfig ~/.kube/config --leader-elect=false
  dractl monitor --metrics-bind-address :9090 --incomplete-grace 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	o.cluster = addClusterFlags(cmd, 0)
	cmd.Flags().StringVar(&o.bind, "metrics-bind-address", ":8080", "address of /metrics, /healthz and /readyz")
	cmd.Flags().BoolVar(&o.leaderElect, "leader-elect", true, "elect one replica to record Events through a Lease")
	cmd.Flags().StringVar(&o.leaseNS, "leader-elect-namespace", "", "namespace of the Lease (default: -n, or the kubeconfig's or service account's namespace)")
	cmd.Flags().DurationVar(&o.grace, "incomplete-grace", monitor.DefaultIncompleteGrace, "how long a pool may stay incomplete before an Event reports it")
	cmd.Flags().BoolVar(&o.metricsAuth, "metrics-auth", false, "serve HTTPS and /metrics only to requests kube-apiserver authenticates and authorizes")
	o.auth.AddFlags(cmd.Flags())
	return cmd
}

func (o *monitorOptions) run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := o.cluster.restConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = monitor.Component
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return usageErrorf("%v", err)
	}
	ln, err := net.Listen("tcp", o.bind)
	if err != nil {
		return usageErrorf("--metrics-bind-address: %v", err)
	}
	m, err := monitor.New(monitor.Options{Client: cs, IncompleteGrace: o.grace})
	if err != nil {
		return err
	}
	if o.metricsAuth {
		if kc := o.cluster.rules.ExplicitPath; kc != "" {
			o.auth.SetKubeconfig(kc)
		}
		serveCtx, stopServing := context.WithCancel(ctx)
		stopped, err := o.auth.Serve(serveCtx, ln, m.Handler())
		if err != nil {
			stopServing()
			ln.Close()
			return fmt.Errorf("--metrics-auth: %w", err)
		}
		defer func() { stopServing(); <-stopped }()
		fmt.Fprintf(o.Err, "serving /metrics (authenticated and authorized), /healthz and /readyz over HTTPS on %s\n", ln.Addr())
	} else {
		srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		fmt.Fprintf(o.Err, "serving /metrics, /healthz and /readyz on %s\n", ln.Addr())
	}
	if !o.leaderElect {
		m.SetLeading(true)
		err = m.Run(ctx)
	} else {
		ns := o.leaseNS
		if ns == "" {
			if ns, err = o.cluster.namespace(); err != nil {
				return err
			}
		}
		err = m.RunWithLeaderElection(ctx, monitor.LeaderElection{Namespace: ns})
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return clusterError(err)
	}
	return nil
}
