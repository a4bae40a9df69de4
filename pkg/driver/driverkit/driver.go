package driverkit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/driver/prepare"
	"github.com/dractl/dractl/pkg/driver/publish"
)

// MixinPolicy chooses the form slices are published in.
type MixinPolicy int

const (
	// PublishFlat flattens every slice: what every server accepts.
	PublishFlat MixinPolicy = iota
	// PublishCompactIfAccepted publishes spec.mixins when the server's
	// schema has the field (ServerAcceptsMixins). The slices travel
	// through the resourceslice controller as k8s.io/api types, which
	// have no mixins field yet; until they do, the driver logs that it
	// publishes flat although the server would accept the compact form.
	PublishCompactIfAccepted
)

// Options configure a Driver.
type Options struct {
	prepare.Config
	NodeName   string
	KubeClient kubernetes.Interface
	// RegistrarDir is the kubelet's plugin registration directory
	// (/var/lib/kubelet/plugins_registry by default); PluginDir holds
	// the DRA socket (/var/lib/kubelet/plugins/<driver> by default).
	RegistrarDir, PluginDir string
	Mixins                  MixinPolicy
	// Server is the kube-apiserver the driver publishes to; Start reads it
	// from KubeClient's discovery when nil (ReadServer).
	Server *publish.Server
	// HealthInterval is how often device health is re-sent to the
	// kubelet, which marks health unknown after 30 s without news, and
	// read again for the devices' taints.
	HealthInterval time.Duration
	// HealthTaints says how a HealthProfile's health becomes taints of
	// the published devices (see taints.go).
	HealthTaints HealthTaints
	// Metrics records what the driver does; nil records into metrics
	// of its own that nobody serves.
	Metrics *Metrics
	// HelperOptions go to kubeletplugin.Start after the kit's own.
	HelperOptions []kubeletplugin.Option
}

// Driver is a kubelet plugin: the Kit behind kubeletplugin's gRPC
// services, publishing through its resourceslice controller.
type Driver struct {
	kit     *prepare.Kit
	opts    Options
	helper  *kubeletplugin.Helper
	metrics *Metrics
	cancel  context.CancelFunc
	server  *publish.Server

	// healthMu guards what is published: the description, its
	// inventory, the health taints put on it and what the Profile last
	// reported.
	healthMu  sync.Mutex
	desc      []*api.ResourceSlice
	published *publish.Published
	inv       prepare.Inventory
	health    healthState
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// Start publishes the pool, reconciles the checkpoints with the hardware
// and only then registers with the kubelet, so that no prepare sees a
// half-restored node. The pool is judged as the node's kube-apiserver
// judges it (BuildFor), the server read once here (ReadServer) unless
// opts.Server is given. An invalid pool fails Start, and so does a server
// that does not serve resource.k8s.io/v1.
func Start(ctx context.Context, opts Options, pool []*api.ResourceSlice) (*Driver, error) {
	if opts.NodeName == "" || opts.KubeClient == nil {
		return nil, errors.New("driverkit: NodeName and KubeClient must be set")
	}
	if opts.HealthInterval == 0 {
		opts.HealthInterval = 10 * time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(opts.DriverName)
	}
	logger := klog.FromContext(ctx)
	kit, err := prepare.New(opts.Config)
	if err != nil {
		return nil, err
	}
	server := opts.Server
	if server == nil {
		if server, err = publish.ReadServer(opts.KubeClient.Discovery()); err != nil {
			return nil, err
		}
	}
	server.Log(logger)
	opts.Metrics.kit.start(kit, opts.Profile)
	ctx, cancel := context.WithCancel(ctx)
	d := &Driver{kit: kit, opts: opts, metrics: opts.Metrics, cancel: cancel, server: server, desc: pool}
	ok := false
	defer func() {
		if !ok {
			cancel()
		}
	}()

	if opts.Mixins == PublishCompactIfAccepted {
		accepts, err := publish.ServerAcceptsMixins(opts.KubeClient.Discovery())
		switch {
		case err != nil:
			logger.Error(err, "Cannot tell whether the server accepts spec.mixins; publishing flat")
		case accepts:
			logger.Info("The server accepts spec.mixins, but k8s.io/api v0.37.2 cannot carry them; publishing flat")
		default:
			logger.V(2).Info("The server does not accept spec.mixins; publishing flat")
		}
	}

	if err := d.publishLocked(ctx, pool, nil); err != nil {
		return nil, err
	}
	hp, health := opts.Profile.(HealthProfile)
	if health {
		// A device found unhealthy at start is tainted from the first
		// publish on, not one poll later.
		if err := d.syncHealth(ctx, hp); err != nil {
			logger.Error(err, "Device health at start; publishing without taints")
		}
	}
	if _, err := kit.Reconcile(ctx); err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	hopts := []kubeletplugin.Option{
		kubeletplugin.DriverName(opts.DriverName),
		kubeletplugin.NodeName(opts.NodeName),
		kubeletplugin.KubeClient(meteredClient{opts.KubeClient, opts.Metrics}),
		// The kit serializes per claim and reserves devices atomically,
		// so claims of different pods are prepared in parallel.
		kubeletplugin.Serialize(false),
		kubeletplugin.HealthService(health),
		kubeletplugin.RegistrarListener(listenOwnerOnly),
		kubeletplugin.PluginListener(listenOwnerOnly),
	}
	if opts.RegistrarDir != "" {
		hopts = append(hopts, kubeletplugin.RegistrarDirectoryPath(opts.RegistrarDir))
	}
	// The helper listens in the plugin directory but does not create it;
	// the kubelet creates only its parent.
	pluginDir := opts.PluginDir
	if pluginDir == "" {
		pluginDir = filepath.Join(kubeletplugin.KubeletPluginsDir, opts.DriverName)
	}
	if err := os.MkdirAll(pluginDir, 0o750); err != nil {
		return nil, fmt.Errorf("plugin directory: %w", err)
	}
	hopts = append(hopts, kubeletplugin.PluginDataDirectoryPath(pluginDir))
	helper, err := kubeletplugin.Start(ctx, d, append(hopts, opts.HelperOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("start kubelet plugin: %w", err)
	}
	d.healthMu.Lock()
	d.helper = helper
	err = helper.PublishResources(ctx, d.published.Resources)
	d.healthMu.Unlock()
	if err != nil {
		d.Stop()
		return nil, fmt.Errorf("publish: %w", err)
	}
	if health {
		go d.watchTaints(ctx, hp)
	}
	ok = true
	return d, nil
}

// listenOwnerOnly creates a unix socket that only its owner may connect
// to: whoever reaches the DRA socket prepares any claim's devices on this
// node, and the kubelet, the one client, runs as root. A socket's mode
// otherwise follows the process's umask: under umask 0 it would be
// world-writable. The mode is set before the first Accept, so
// no connection is served through the wider one. The listener removes the
// socket when it closes.
func listenOwnerOnly(ctx context.Context, path string) (net.Listener, error) {
	// A stale socket of a previous process would fail the listen.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		l.Close()
		return nil, fmt.Errorf("socket mode: %w", err)
	}
	return l, nil
}

// SocketMode is the mode of the driver's registration and DRA sockets.
const SocketMode fs.FileMode = 0o600

// build validates a pool description; a refusal is also an Event on the
// Node, where an operator looking at the node sees why its devices are
// missing. The event is written before build returns (not through a
// broadcaster that a failing Start would shut down with it queued).
func (d *Driver) build(ctx context.Context, pool []*api.ResourceSlice, taints taintSet) (*publish.Published, error) {
	published, err := publish.BuildTainted(d.server, d.opts.DriverName, d.opts.NodeName, pool, taints.of)
	if err != nil {
		now := metav1.Now()
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: d.opts.NodeName + ".", Namespace: metav1.NamespaceDefault},
			InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: d.opts.NodeName},
			Type:           corev1.EventTypeWarning, Reason: EventReasonInvalidPool,
			Message:        truncate(fmt.Sprintf("%s: %v", d.opts.DriverName, err), 1024),
			Source:         corev1.EventSource{Component: d.opts.DriverName, Host: d.opts.NodeName},
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
		if _, evErr := d.opts.KubeClient.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); evErr != nil {
			klog.FromContext(ctx).Error(evErr, "Recording the refused pool on the Node")
		}
		return nil, err
	}
	return published, nil
}

// truncate keeps an event message within what kube-apiserver stores.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Publish replaces the published pool. An invalid description is refused
// and the previous pool stays published.
func (d *Driver) Publish(ctx context.Context, pool []*api.ResourceSlice) error {
	d.healthMu.Lock()
	defer d.healthMu.Unlock()
	return d.publishLocked(ctx, pool, d.health.taints)
}

// publishLocked publishes a description with taints, under healthMu.
// Before the helper runs (at start) it only prepares what Start
// publishes.
func (d *Driver) publishLocked(ctx context.Context, pool []*api.ResourceSlice, taints taintSet) error {
	published, err := d.build(ctx, pool, taints)
	if err != nil {
		return err
	}
	inv := prepare.InventoryOf(published.Resources)
	d.kit.SetInventory(inv)
	d.desc, d.published, d.inv, d.health.taints = pool, published, inv, taints
	if d.helper == nil {
		return nil
	}
	return d.helper.PublishResources(ctx, published.Resources)
}

// Kit is the driver's prepare/unprepare engine.
func (d *Driver) Kit() *prepare.Kit { return d.kit }

// Helper is the kubeletplugin helper serving the driver.
func (d *Driver) Helper() *kubeletplugin.Helper { return d.helper }

// Stop unregisters from the kubelet and stops publishing. Published
// slices stay; prepared claims stay prepared.
func (d *Driver) Stop() {
	d.cancel()
	d.helper.Stop()
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	defer d.metrics.request(OperationPrepare)()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		start := time.Now()
		devices, err := d.kit.Prepare(ctx, c)
		d.metrics.claimDone(OperationPrepare, start, err)
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devices, Err: err}
	}
	return out, nil
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	defer d.metrics.request(OperationUnprepare)()
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		start := time.Now()
		err := d.kit.Unprepare(ctx, c.UID)
		d.metrics.claimDone(OperationUnprepare, start, err)
		out[c.UID] = err
	}
	return out, nil
}

// HandleError implements kubeletplugin.DRAPlugin. Publishing errors are
// recoverable (the controller retries); they are logged.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	// Failed writes are counted where they fail (meteredClient).
	var dropped *resourceslice.DroppedFieldsError
	if errors.As(err, &dropped) {
		d.metrics.publishFailed(PublishFailureDroppedFields)
	}
	klog.FromContext(ctx).Error(err, msg, "recoverable", errors.Is(err, kubeletplugin.ErrRecoverable))
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin: every published
// device, healthy unless the profile says otherwise, re-sent every
// HealthInterval.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	hp, ok := d.opts.Profile.(HealthProfile)
	if !ok {
		return kubeletplugin.ErrHealthNotSupported
	}
	tick := time.NewTicker(d.opts.HealthInterval)
	defer tick.Stop()
	for {
		report, err := d.healthReport(ctx, hp)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Device health")
		} else {
			select {
			case <-ctx.Done():
				return nil
			case reports <- report:
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (d *Driver) healthReport(ctx context.Context, hp HealthProfile) (kubeletplugin.DeviceHealthReport, error) {
	bad, err := hp.Health(ctx)
	if err != nil {
		return kubeletplugin.DeviceHealthReport{}, err
	}
	inv := d.inventory()
	keys := inv.Devices()
	// A GPU's partitions are as unhealthy as the GPU (see taints.go).
	bad = maps.Clone(bad)
	for _, k := range sortedKeys(bad) {
		if !inv.Known(k) {
			continue
		}
		for _, child := range inv.Children(k) {
			if _, ok := bad[child]; !ok {
				bad[child] = bad[k]
			}
		}
	}
	now := time.Now()
	report := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, 0, len(keys))}
	for _, k := range keys {
		h := kubeletplugin.DeviceHealth{PoolName: k.Pool, DeviceName: k.Device, Health: kubeletplugin.HealthStatusHealthy, LastUpdated: now}
		if msg, ok := bad[k]; ok {
			h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, msg
		}
		report.Devices = append(report.Devices, h)
	}
	return report, nil
}

// HealthProfile is a Profile that knows the health of its devices. The kit
// serves it through the kubelet's DRAResourceHealth service; without it
// the service answers that health is not supported.
type HealthProfile interface {
	prepare.Profile
	// Health reports every published device that is not healthy, by
	// pool and device name; devices not listed are healthy.
	Health(ctx context.Context) (map[prepare.DeviceKey]string, error)
}

// inventory is what the driver publishes now, as the kit checks prepares
// against it.
func (d *Driver) inventory() prepare.Inventory {
	d.healthMu.Lock()
	defer d.healthMu.Unlock()
	return d.inv
}

// NodeConfig is what a node driver's process is told on its command line
// beyond its Profile: who it is, where it keeps its state and meets the
// kubelet, how it publishes, and (crash tests only) where it dies.
type NodeConfig struct {
	DriverName, NodeName string
	// StateDir keeps the checkpoints; CDIDir is read by the container
	// runtime.
	StateDir, CDIDir string
	// RegistrarDir and PluginDir are the kubelet's; empty means the
	// kubelet defaults.
	RegistrarDir, PluginDir string
	// CompactIfAccepted publishes with mixins when the API server serves
	// them (PublishCompactIfAccepted), else flat.
	CompactIfAccepted bool
	// Failpoint kills the process at that step of prepare or unprepare
	// (PrepareFailpoints, UnprepareFailpoints); empty for none.
	Failpoint string
	NodeOptions
}

// NodeOptions are the Options a node driver's command line sets beyond
// NodeConfig's.
type NodeOptions struct {
	HealthInterval time.Duration
	HealthTaints   HealthTaints
	Metrics        *Metrics
}

// StartNode starts a node driver from its command-line configuration:
// Start with the profile, its pool and the CDI class its devices are
// named under.
func StartNode(ctx context.Context, cfg NodeConfig, cdiClass string, client kubernetes.Interface, profile prepare.Profile, pool []*api.ResourceSlice) (*Driver, error) {
	kill, err := prepare.KillAt(cfg.Failpoint)
	if err != nil {
		return nil, err
	}
	mixins := PublishFlat
	if cfg.CompactIfAccepted {
		mixins = PublishCompactIfAccepted
	}
	d, err := Start(ctx, Options{
		Config: prepare.Config{
			DriverName: cfg.DriverName, Profile: profile,
			StateDir: cfg.StateDir, CDIDir: cfg.CDIDir, CDIClass: cdiClass,
			Failpoint: kill,
		},
		NodeName: cfg.NodeName, KubeClient: client,
		RegistrarDir: cfg.RegistrarDir, PluginDir: cfg.PluginDir,
		Mixins: mixins, HealthInterval: cfg.HealthInterval, HealthTaints: cfg.HealthTaints,
		Metrics: cfg.Metrics,
	}, pool)
	if err != nil {
		return nil, fmt.Errorf("start driver: %w", err)
	}
	return d, nil
}

// KubeClient is the API client of a driver's process: from kubeconfig
// when one is named (out of cluster, tests), else the Pod's service
// account.
func KubeClient(kubeconfig string) (kubernetes.Interface, error) {
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	return kubernetes.NewForConfig(rc)
}
