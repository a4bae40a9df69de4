package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/gpu"
)

// Backends are the values of --backend.
var Backends = []string{"mock", "nvml"}

// Options are the driver's flags.
type Options struct {
	Backend string
	gpu.Config
	// NVMLMock (test only) runs the NVML backend on a mock server of
	// go-nvml (pkg/driver/nvmlgpu/nvmlmock).
	NVMLMock string
	// MigMinors is the kernel driver's table of MIG capability minors.
	MigMinors string
	// UnhealthyTaintEffect is --unhealthy-taint-effect.
	UnhealthyTaintEffect string
	// MetricsBindAddress serves /metrics there when set; MetricsAuth
	// puts it behind delegated authentication and authorization, with
	// TLSCertFile and TLSKeyFile as its certificate (self-signed when
	// empty) and the reviews through Kubeconfig (in-cluster when empty).
	MetricsBindAddress      string
	MetricsAuth             bool
	TLSCertFile, TLSKeyFile string
	Kubeconfig              string
	// DevRoot is where the NVIDIA driver's device nodes are (dev/ of it).
	DevRoot string

	healthTaints bool
	set          map[string]bool
}

// hidden flags are left out of -help: they are for tests.
var hidden = []string{"nvml-mock"}

// mockOnly flags have no meaning on NVML, which discovers the GPUs.
var mockOnly = []string{"gpu-model", "gpus"}

// AddFlags registers the driver's flags on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Backend, "backend", "mock", "GPU backend: mock (GPUs simulated in the state directory) or nvml (the node's NVIDIA GPUs through NVML)")
	fs.StringVar(&o.DriverName, "driver-name", gpu.DriverName, "DRA driver name")
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default $NODE_NAME)")
	fs.StringVar(&o.Model, "gpu-model", "a100", "mock backend: GPU model, a100 (A100-SXM4-40GB) or h100 (H100 80GB HBM3)")
	fs.IntVar(&o.GPUs, "gpus", 2, "mock backend: number of GPUs on the node")
	fs.StringVar(&o.StateDir, "state-dir", "/var/lib/dractl-gpu-driver", "checkpoints, the record of created MIG devices (and simulated GPUs); must survive driver restarts")
	fs.StringVar(&o.CDIDir, "cdi-dir", "/var/run/cdi", "directory the container runtime reads CDI specs from")
	fs.StringVar(&o.RegistrarDir, "registrar-dir", "", "kubelet plugin registration directory (default /var/lib/kubelet/plugins_registry)")
	fs.StringVar(&o.PluginDir, "plugin-dir", "", "directory of the DRA socket (default /var/lib/kubelet/plugins/<driver name>)")
	fs.BoolVar(&o.CompactIfAccepted, "compact-if-accepted", true, "publish ResourceSlice mixins when the API server accepts them (otherwise flat)")
	fs.StringVar(&o.MigMinors, "nvml-mig-minors", "/proc/driver/nvidia-caps/mig-minors", "nvml backend: the NVIDIA kernel driver's table of MIG capability device minors")
	fs.StringVar(&o.DevRoot, "nvml-dev-root", "/", "nvml backend: the host directory whose dev/ holds the NVIDIA device nodes (the driver root, e.g. /run/nvidia/driver when a driver container installs it)")
	fs.DurationVar(&o.Kit.HealthInterval, "health-interval", 10*time.Second, "how often device health is read, sent to the kubelet and turned into device taints")
	fs.BoolVar(&o.healthTaints, "health-taints", true, "taint unhealthy devices in the published ResourceSlices (key "+driverkit.TaintKeyUnhealthy+")")
	fs.StringVar(&o.UnhealthyTaintEffect, "unhealthy-taint-effect", string(resourcev1.DeviceTaintEffectNoSchedule),
		"effect of an unhealthy device's taint: NoSchedule keeps new claims off it, NoExecute also evicts the pods using it")
	fs.BoolVar(&o.Kit.HealthTaints.Notices, "health-notice-taints", true,
		"publish health events that leave a device healthy (an application's XID) as informational taints of effect None (key "+driverkit.TaintKeyHealthEvent+"); needs kube-apiserver 1.36 or later")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", "", "serve /metrics and /healthz on this address (off when empty)")
	fs.BoolVar(&o.MetricsAuth, "metrics-auth", false, "serve HTTPS and /metrics only to requests kube-apiserver authenticates and authorizes")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "with --metrics-auth: x509 certificate of the metrics endpoint (a self-signed one is generated in memory when empty)")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", "", "private key of --tls-cert-file")
	fs.StringVar(&o.NVMLMock, "nvml-mock", "", "test only: run the nvml backend on a go-nvml mock server (dgxa100, dgxh100, dgxh200, dgxb200)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
		fs.VisitAll(func(f *flag.Flag) {
			if slices.Contains(hidden, f.Name) {
				return
			}
			// A usage that says its default (one from the environment,
			// or one the driver name decides) is not given a second.
			def := ""
			if f.DefValue != "" && !strings.Contains(f.Usage, "(default ") {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(fs.Output(), "  -%s\n    \t%s%s\n", f.Name, f.Usage, def)
		})
	}
}

// Complete checks the parsed flags of fs.
func (o *Options) Complete(fs *flag.FlagSet) error {
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if !slices.Contains(Backends, o.Backend) {
		return fmt.Errorf("--backend=%s: want one of %s", o.Backend, strings.Join(Backends, ", "))
	}
	if o.NodeName == "" {
		return fmt.Errorf("--node-name (or $NODE_NAME) is required")
	}
	if o.Backend == "nvml" {
		for _, f := range mockOnly {
			if o.set[f] {
				return fmt.Errorf("--%s applies to --backend=mock only; the nvml backend discovers the GPUs", f)
			}
		}
	} else if o.NVMLMock != "" || o.set["nvml-mig-minors"] || o.set["nvml-dev-root"] {
		return fmt.Errorf("--nvml-mock, --nvml-mig-minors and --nvml-dev-root apply to --backend=nvml only")
	}
	switch resourcev1.DeviceTaintEffect(o.UnhealthyTaintEffect) {
	case resourcev1.DeviceTaintEffectNoSchedule:
	case resourcev1.DeviceTaintEffectNoExecute:
		o.Kit.HealthTaints.Evict = true
	default:
		return fmt.Errorf("--unhealthy-taint-effect=%s: want NoSchedule or NoExecute", o.UnhealthyTaintEffect)
	}
	if o.Kit.HealthInterval <= 0 {
		return fmt.Errorf("--health-interval=%s: want a positive duration", o.Kit.HealthInterval)
	}
	o.Kit.HealthTaints.Disabled = !o.healthTaints
	if o.MetricsAuth && o.MetricsBindAddress == "" {
		return fmt.Errorf("--metrics-auth needs --metrics-bind-address")
	}
	return nil
}

// Run runs the chosen backend until ctx is done, and its metrics
// endpoint if asked.
func Run(ctx context.Context, o Options, client kubernetes.Interface) error {
	if o.MetricsBindAddress != "" {
		o.Kit.Metrics = driverkit.NewMetrics(o.DriverName)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wait, err := serveMetrics(ctx, o, o.Kit.Metrics)
		if err != nil {
			return err
		}
		defer func() {
			cancel()
			wait()
		}()
	}
	if o.Backend == "nvml" {
		return runNVML(ctx, o, client)
	}
	return gpu.Run(ctx, o.Config, client)
}
