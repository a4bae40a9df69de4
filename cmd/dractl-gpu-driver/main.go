// Command dractl-gpu-driver is a partitionable GPU driver: a DRA kubelet
// plugin that publishes MIG GPUs with counter sets and creates the
// allocated MIG device at prepare time, on simulated GPUs (--backend=mock,
// pkg/driver/mig tables) or on the node's NVIDIA GPUs through NVML
// (--backend=nvml). See deploy/driver/ for its DaemonSets and
// flags.go for its flags; metrics.go serves its metrics.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/driver/driverkit"
)

func main() {
	var opts Options
	var kubeconfig string
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	klog.InitFlags(fs)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	opts.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	opts.Failpoint = os.Getenv("DRACTL_GPU_DRIVER_FAILPOINT")
	opts.Kubeconfig = kubeconfig

	if err := run(fs, opts, kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "dractl-gpu-driver:", err)
		os.Exit(1)
	}
}

func run(fs *flag.FlagSet, opts Options, kubeconfig string) error {
	if err := opts.Complete(fs); err != nil {
		return err
	}
	client, err := driverkit.KubeClient(kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, opts, client)
}
