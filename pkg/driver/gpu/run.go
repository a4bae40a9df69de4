package gpu

import (
	"context"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/driver/driverkit"
)

// DriverName is the DRA driver name of dractl-gpu-driver, and the domain
// of its attributes and capacities.
const DriverName = "gpu.dractl.dev"

// Config is the configuration of dractl-gpu-driver.
type Config struct {
	DriverName string
	NodeName   string
	// Model is a MIG table of pkg/driver/mig ("a100", "h100" or a full name);
	// GPUs how many the node has.
	Model string
	GPUs  int
	// StateDir keeps checkpoints (claims/) and the simulated GPUs
	// (gpus/); CDIDir is read by the container runtime.
	StateDir, CDIDir string
	// RegistrarDir and PluginDir are the kubelet's; empty means the
	// kubelet defaults.
	RegistrarDir, PluginDir string
	// CompactIfAccepted asks the server whether it accepts spec.mixins
	// (see driverkit.PublishCompactIfAccepted).
	CompactIfAccepted bool
	// Failpoint, for crash tests, kills the driver at that step of
	// prepare or unprepare (see prepare.PrepareFailpoints).
	Failpoint string
	// Node holds what every node driver shares beyond the above: health
	// polling and taints, metrics.
	Kit driverkit.NodeOptions
}

// Run starts the driver and serves until ctx is done.
func Run(ctx context.Context, cfg Config, client kubernetes.Interface) error {
	gpus, err := New(cfg.DriverName, cfg.NodeName, cfg.Model, cfg.GPUs, filepath.Join(cfg.StateDir, "gpus"))
	if err != nil {
		return err
	}
	if err := gpus.CreateDeviceNodes(); err != nil {
		return err
	}
	d, err := driverkit.StartNode(ctx, driverkit.NodeConfig{
		DriverName: cfg.DriverName, NodeName: cfg.NodeName, StateDir: cfg.StateDir, CDIDir: cfg.CDIDir,
		RegistrarDir: cfg.RegistrarDir, PluginDir: cfg.PluginDir, CompactIfAccepted: cfg.CompactIfAccepted, Failpoint: cfg.Failpoint,
		NodeOptions: cfg.Kit,
	}, "gpu", client, gpus, gpus.Pool())
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Serving", "driver", cfg.DriverName, "node", cfg.NodeName, "gpus", cfg.GPUs, "model", gpus.Model.Name)
	<-ctx.Done()
	d.Stop()
	return nil
}
