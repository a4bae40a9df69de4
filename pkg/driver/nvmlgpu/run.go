package nvmlgpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/nvmlgpu/nvmlmock"
)

// Config is the configuration of dractl-gpu-driver on NVML.
type Config struct {
	DriverName, NodeName string
	// StateDir keeps checkpoints (claims/) and the record of the
	// instances the driver created; CDIDir is read by the runtime.
	StateDir, CDIDir string
	// RegistrarDir and PluginDir are the kubelet's; empty means the
	// kubelet defaults.
	RegistrarDir, PluginDir string
	// CompactIfAccepted: see driverkit.PublishCompactIfAccepted.
	CompactIfAccepted bool
	// Failpoint, for crash tests, kills the driver at that step.
	Failpoint string
	// MigMinors is the kernel driver's table of MIG capability minors;
	// DefaultMigMinors when empty.
	MigMinors string
	// DevRoot is where the host's NVIDIA device nodes are (Options).
	DevRoot string
	// Mock, for tests only, runs on the named nvmlmock server instead of
	// the host's NVML. Its instances are kept in StateDir (MockInstances),
	// so a restarted driver finds them as it would on a GPU.
	Mock string
	// MockFailpoint, for crash tests, kills the driver at that change of
	// the mock's instances (nvmlmock.Failpoints).
	MockFailpoint string
	// Node holds what every node driver shares beyond the above: health
	// polling and taints, metrics.
	Kit driverkit.NodeOptions
}

// MockInstances is the file in stateDir where Run keeps the instances of
// its mock server (Config.Mock).
func MockInstances(stateDir string) string {
	return filepath.Join(stateDir, "mock-nvml-instances.json")
}

// MockDevRoot is the DevRoot of a driver on a mock server (Config.Mock):
// its dev/ holds the mock kernel driver's device nodes.
func MockDevRoot(stateDir string) string { return filepath.Join(stateDir, "mock-root") }

// Run starts the driver on NVML and serves until ctx is done.
func Run(ctx context.Context, cfg Config, client kubernetes.Interface) error {
	logger := klog.FromContext(ctx)
	if cfg.MockFailpoint != "" && cfg.Mock == "" {
		return errors.New("a mock NVML failpoint needs a mock NVML server")
	}
	var lib nvml.Interface
	if cfg.Mock != "" {
		if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
			return err
		}
		srv, err := nvmlmock.Open(cfg.Mock, MockInstances(cfg.StateDir))
		if err != nil {
			return err
		}
		if err := srv.KillAt(cfg.MockFailpoint); err != nil {
			return err
		}
		cfg.MigMinors = filepath.Join(cfg.StateDir, "mock-mig-minors")
		if err := srv.WriteMigMinors(cfg.MigMinors); err != nil {
			return err
		}
		// The mock's kernel driver has its device nodes in the state
		// directory, where a container runtime finds them.
		cfg.DevRoot = MockDevRoot(cfg.StateDir)
		if err := srv.WriteDeviceNodes(filepath.Join(cfg.DevRoot, "dev")); err != nil {
			return err
		}
		lib = srv
		logger.Info("Running on a mock NVML server, for tests only", "server", cfg.Mock)
	} else {
		lib = nvml.New()
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("initialize NVML (is the NVIDIA driver installed and libnvidia-ml.so.1 visible?): %w", ret)
	}
	defer lib.Shutdown()

	gpus, err := New(lib, Options{Driver: cfg.DriverName, Node: cfg.NodeName, StateDir: cfg.StateDir, MigMinors: cfg.MigMinors, DevRoot: cfg.DevRoot}, logger)
	if err != nil {
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
	health := make(chan error, 1)
	go func() { health <- gpus.WatchHealth(ctx) }()
	logger.Info("Serving", "driver", cfg.DriverName, "node", cfg.NodeName, "backend", "nvml", "gpus", len(gpus.gpus))
	<-ctx.Done()
	d.Stop()
	if err := <-health; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
