// Command dractl-gpu-driver is a mock partitionable GPU driver: a DRA
// kubelet plugin that publishes MIG GPUs (pkg/mig tables) with counter
// sets and creates the allocated MIG device at prepare time. See
// deploy/driver/ for its DaemonSet.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/mockgpu"
)

func main() {
	var cfg mockgpu.Config
	var kubeconfig string
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	klog.InitFlags(fs)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&cfg.DriverName, "driver-name", mockgpu.DriverName, "DRA driver name")
	fs.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default $NODE_NAME)")
	fs.StringVar(&cfg.Model, "gpu-model", "a100", "GPU model: a100 (A100-SXM4-40GB) or h100 (H100 80GB HBM3)")
	fs.IntVar(&cfg.GPUs, "gpus", 2, "number of GPUs on the node")
	fs.StringVar(&cfg.StateDir, "state-dir", "/var/lib/dractl-gpu-driver", "checkpoints and simulated GPUs; must survive driver restarts")
	fs.StringVar(&cfg.CDIDir, "cdi-dir", "/var/run/cdi", "directory the container runtime reads CDI specs from")
	fs.StringVar(&cfg.RegistrarDir, "registrar-dir", "", "kubelet plugin registration directory (default /var/lib/kubelet/plugins_registry)")
	fs.StringVar(&cfg.PluginDir, "plugin-dir", "", "directory of the DRA socket (default /var/lib/kubelet/plugins/<driver name>)")
	fs.BoolVar(&cfg.CompactIfAccepted, "compact-if-accepted", true, "publish ResourceSlice mixins when the API server accepts them (otherwise flat)")
	_ = fs.Parse(os.Args[1:])
	cfg.Failpoint = os.Getenv("DRACTL_GPU_DRIVER_FAILPOINT")

	if err := run(cfg, kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "dractl-gpu-driver:", err)
		os.Exit(1)
	}
}

func run(cfg mockgpu.Config, kubeconfig string) error {
	if cfg.NodeName == "" {
		return fmt.Errorf("--node-name (or $NODE_NAME) is required")
	}
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mockgpu.Run(ctx, cfg, client)
}
