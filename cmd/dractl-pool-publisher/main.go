// Command dractl-pool-publisher publishes the pools of a DRA driver that
// no node owns — network-attached devices, a multi-host TPU block with
// perDeviceNodeSelection, devices every node sees — from the control
// plane, as KEP-4815 has them published: a Deployment of replicas of which
// the one holding a Lease publishes (publish.StartController). The pools
// are described in files of ResourceSlices in dractl's API (mixins
// allowed), validated and flattened as dractl-gpu-driver's node pools
// are. The Helm chart deploy/helm/dractl runs it (publisher.enabled).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/publish"
)

type options struct {
	kubeconfig, driver string
	pools              stringList
	le                 publish.LeaderElection
	syncDelay          time.Duration
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var o options
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	klog.InitFlags(fs)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&o.driver, "driver-name", "", "DRA driver name of the pools (required)")
	fs.Var(&o.pools, "pools", "file or directory of ResourceSlices describing the pools (repeatable; required)")
	fs.StringVar(&o.le.Namespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Lease (default $POD_NAMESPACE)")
	fs.StringVar(&o.le.Name, "leader-election-name", "", "name of the Lease (default <driver name>-publisher)")
	fs.StringVar(&o.le.Identity, "leader-election-identity", os.Getenv("POD_NAME"), "this replica's identity in the Lease (default $POD_NAME, else the host name and a random suffix)")
	fs.DurationVar(&o.syncDelay, "sync-delay", 0, "how long the leader waits after a slice changed before it reconciles again (default 30s)")
	_ = fs.Parse(os.Args[1:])
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "dractl-pool-publisher:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.driver == "" || len(o.pools) == 0 || o.le.Namespace == "" {
		return fmt.Errorf("--driver-name, --pools and --leader-election-namespace (or $POD_NAMESPACE) are required")
	}
	objs, err := decode.Paths(o.pools, nil)
	if err != nil {
		return err
	}
	var pool []*api.ResourceSlice
	for _, obj := range objs {
		s, ok := obj.Obj.(*api.ResourceSlice)
		if !ok {
			return fmt.Errorf("%s: a %s; --pools takes ResourceSlices only", obj.Source, obj.Kind)
		}
		pool = append(pool, s)
	}
	client, err := driverkit.KubeClient(o.kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := publish.StartController(ctx, publish.ControllerOptions{
		DriverName: o.driver, KubeClient: client, LeaderElection: o.le, SyncDelay: o.syncDelay,
	}, pool)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Competing to publish", "driver", o.driver, "pools", len(c.Published().Resources.Pools))
	c.Wait()
	return nil
}
