package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/configz"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"

	schedapp "github.com/dractl/dractl/scheduler/app"
)

// Scheduler is dractl-scheduler: kube-scheduler v1.37 with dractl's DRA
// plugin registered, configured by a KubeSchedulerConfiguration file and
// run in this process as its binary runs it (app.Setup, app.Run: shared
// informers, event recording, secure serving of /healthz and /metrics).
// Leader election is off; the client comes from Client.
type Scheduler struct {
	// ConfigFile is a KubeSchedulerConfiguration, e.g. one from
	// deploy/scheduler. Its clientConnection and leaderElection are
	// replaced.
	ConfigFile string
	// Client is who the scheduler is; nil means an administrator.
	Client *rest.Config
	// QPS and Burst of the scheduler's client; zero keeps the
	// configuration's (kube-scheduler's defaults are 50 and 100).
	QPS   float32
	Burst int32
	// Address, when set, receives the address of the secure port, which
	// serves /healthz and /metrics without authorization here.
	Address *string
}

func (Scheduler) Name() string { return "dractl-scheduler" }

func (s Scheduler) Start(ctx context.Context, cp *ControlPlane) error {
	cfg := s.Client
	if cfg == nil {
		cfg = cp.ClientConfig("dractl-scheduler")
	}
	configFile, err := SchedulerConfig(s.ConfigFile, cp.Kubeconfig(cfg), s.QPS, s.Burst, cp.tb.TempDir(), false)
	if err != nil {
		return err
	}
	opts := options.NewOptions()
	// A registry of its own, as kube-scheduler's test server does, so
	// that a second scheduler in this process can register its gates.
	fg := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	version := utilcompatibility.DefaultKubeEffectiveVersionForTest()
	version.SetEmulationVersion(fg.EmulationVersion())
	version.SetMinCompatibilityVersion(fg.MinCompatibilityVersion())
	registry := compatibility.NewComponentGlobalsRegistry()
	if err := registry.Register(compatibility.DefaultKubeComponent, version, fg); err != nil {
		return err
	}
	opts.ComponentGlobalsRegistry = registry
	opts.ConfigFile = configFile
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if s.Address != nil {
		*s.Address = ln.Addr().String()
	}
	opts.SecureServing.Listener = ln
	opts.SecureServing.BindPort = ln.Addr().(*net.TCPAddr).Port
	opts.SecureServing.ServerCert.CertDirectory = cp.tb.TempDir()
	opts.Authorization.AlwaysAllowPaths = append(opts.Authorization.AlwaysAllowPaths, "/healthz", "/metrics")
	cc, sched, err := app.Setup(ctx, opts, schedapp.Option())
	if err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cc, sched)
		configz.Delete("componentconfig")
	}()
	cert, _ := cc.SecureServing.Cert.CurrentCertKeyContent()
	hc, err := cc.SecureServing.NewClientConfig(cert)
	if err != nil {
		return err
	}
	hc.TLSClientConfig.ServerName = "127.0.0.1"
	health, err := kubernetes.NewForConfig(hc)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("stopped: %w", err)
		default:
		}
		status := 0
		health.CoreV1().RESTClient().Get().AbsPath("/healthz").Do(ctx).StatusCode(&status)
		return status == 200, nil
	})
}

// SchedulerConfig writes a copy of the KubeSchedulerConfiguration in file
// into dir with the given kubeconfig, client QPS and burst (zero: keep)
// and leader election off, or as the file configures it if leaderElect,
// and returns its path.
func SchedulerConfig(file, kubeconfig string, qps float32, burst int32, dir string, leaderElect bool) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	if qps > 0 {
		conn["qps"] = qps
	}
	if burst > 0 {
		conn["burst"] = burst
	}
	cfg["clientConnection"] = conn
	if !leaderElect {
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "scheduler-"+filepath.Base(file))
	return path, os.WriteFile(path, out, 0o600)
}
