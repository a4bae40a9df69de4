package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	pluginregistration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	draplugin "k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/events"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"k8s.io/utils/ptr"
)

// Kubelet is the DRA half of a kubelet on one node, built from the
// kubelet's own packages: the DRA manager (pkg/kubelet/cm/dra), with its
// checkpoint in RootDir, behind the plugin manager
// (pkg/kubelet/pluginmanager), which watches RootDir/plugins_registry for
// drivers' registration sockets and registers them with the manager's
// handler, and so talks to drivers over their real unix sockets.
//
// What a kubelet's pod workers do with DRA is done by a small pod loop
// over the pods bound to the node: a new pod's claims are prepared
// (PrepareResources), the CDI devices of each container are looked up as
// the kubelet does for the CRI (GetResources) and the pod is reported
// Running; a failed prepare is a FailedPrepareDynamicResources Event and
// is retried. A pod being deleted, or done, has its claims unprepared
// (UnprepareResources) before its status says so, and a deleted pod is
// then removed with grace period zero, as the kubelet's status manager
// removes it once its resources are reclaimed. Containers are not run: no
// container runtime is involved, so a pod being deleted ends Succeeded.
//
// It acts as its node (ControlPlane.NodeConfig: system:node:<name>),
// under kube-apiserver's Node authorizer and NodeRestriction admission, as
// a real kubelet does.
type Kubelet struct {
	NodeName string
	// RootDir is the kubelet's --root-dir. Unix socket paths are limited
	// to 107 bytes, and drivers put theirs beneath it: keep it short.
	RootDir string
	// RetryPeriod is how soon a pod whose prepare or unprepare failed is
	// synced again; the kubelet's pod workers wait 10 s (its
	// backOffPeriod), 1 s by default here so that tests do not.
	RetryPeriod time.Duration

	client  kubernetes.Interface
	manager *dra.Manager
	queue   workqueue.TypedDelayingInterface[types.UID]

	mu sync.Mutex
	// pods are the node's pods by UID, as last seen; gone marks those
	// deleted from the API server.
	pods map[types.UID]*corev1.Pod
	gone sets.Set[types.UID]
	// cdi holds what the kubelet hands the container runtime (the CRI's
	// ContainerConfig.CDIDevices) for each container of a running pod.
	cdi map[types.UID]map[string][]string
}

func (*Kubelet) Name() string { return "kubelet DRA manager" }

// RegistrationDir is where drivers put their registration sockets
// (--registrar-dir of dractl-gpu-driver; the kubeletplugin helper's
// RegistrarDirectoryPath).
func (k *Kubelet) RegistrationDir() string { return filepath.Join(k.RootDir, "plugins_registry") }

// PluginDir is where a driver keeps its DRA socket (PluginDataDirectoryPath).
func (k *Kubelet) PluginDir(driver string) string {
	return filepath.Join(k.RootDir, "plugins", driver)
}

// StateFile is the DRA manager's checkpoint of prepared claims.
func (k *Kubelet) StateFile() string { return filepath.Join(k.RootDir, draCheckpoint) }

// draCheckpoint is the DRA manager's checkpoint file in the kubelet's
// root directory.
const draCheckpoint = "dra_manager_state"

// PreparedClaims reads the DRA manager's checkpoint from disk: the claims
// it has prepared (or is preparing), their pods, and each driver's answer.
func (k *Kubelet) PreparedClaims() (state.ClaimInfoStateList, error) {
	return readDRACheckpoint(k.RootDir)
}

// readDRACheckpoint reads the DRA manager's checkpoint in a kubelet's
// root directory.
func readDRACheckpoint(rootDir string) (state.ClaimInfoStateList, error) {
	c, err := state.NewCheckpointer(rootDir, draCheckpoint)
	if err != nil {
		return nil, err
	}
	cp, err := c.GetOrCreate()
	if err != nil {
		return nil, err
	}
	return cp.GetClaimInfoStateList()
}

// CDIDevices returns the CDI device IDs the kubelet passed to the
// container runtime for a container of a running pod; nil if the pod is
// not running.
func (k *Kubelet) CDIDevices(pod types.UID, container string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cdi[pod][container]
}

// Registered reports whether a driver has registered with the DRA
// manager and has a connection to its plugin.
func (k *Kubelet) Registered(driver string) bool {
	pm, ok := k.manager.GetWatcherHandler().(*draplugin.DRAPluginManager)
	if !ok {
		return false
	}
	_, err := pm.GetPlugin(driver)
	return err == nil
}

func (k *Kubelet) Start(ctx context.Context, cp *ControlPlane) error {
	if k.NodeName == "" || k.RootDir == "" {
		return errors.New("NodeName and RootDir must be set")
	}
	if k.RetryPeriod == 0 {
		k.RetryPeriod = time.Second
	}
	for _, dir := range []string{k.RegistrationDir(), filepath.Join(k.RootDir, "plugins")} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "node", k.NodeName)
	ctx = klog.NewContext(ctx, logger)
	client, err := kubernetes.NewForConfig(cp.NodeConfig(k.NodeName))
	if err != nil {
		return err
	}
	k.client = client
	k.pods, k.gone, k.cdi = map[types.UID]*corev1.Pod{}, sets.New[types.UID](), map[types.UID]map[string][]string{}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: k.NodeName})

	k.manager, err = dra.NewManager(logger, client, k.RootDir)
	if err != nil {
		return err
	}

	// The kubelet watches the pods bound to its node.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.NodeName).String()
	}))
	k.queue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.UID]{Name: "kubelet-pods-" + k.NodeName})
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.seen(obj, false) },
		UpdateFunc: func(_, obj any) { k.seen(obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			k.seen(obj, true)
		},
	}); err != nil {
		return err
	}
	if err := startInformers(ctx, factory); err != nil {
		return err
	}

	// The API server is the kubelet's only pod source here, and it has
	// synced.
	ready := kubeletconfig.NewSourcesReady(func(sets.Set[string]) bool { return true })
	getNode := func(ctx context.Context) (*corev1.Node, error) {
		return client.CoreV1().Nodes().Get(ctx, k.NodeName, metav1.GetOptions{})
	}
	if err := k.manager.Start(ctx, k.activePods, getNode, ready); err != nil {
		return fmt.Errorf("starting the DRA manager: %w", err)
	}
	plugins := pluginmanager.NewPluginManager(k.RegistrationDir(), recorder)
	plugins.AddHandler(pluginregistration.DRAPlugin, k.manager.GetWatcherHandler())
	go plugins.Run(ctx, ready, ctx.Done())

	// Device health updates feed the kubelet's pod status; nothing here
	// reports health, but the manager must not block on a full channel.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.manager.Updates():
			}
		}
	}()

	var workers sync.WaitGroup
	for range 4 {
		workers.Go(func() {
			for k.next(ctx, recorder) {
			}
		})
	}
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
		workers.Wait()
		k.manager.Stop()
		broadcaster.Shutdown()
	}()
	return nil
}

func (k *Kubelet) seen(obj any, deleted bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	k.pods[pod.UID] = pod
	if deleted {
		k.gone.Insert(pod.UID)
	}
	k.mu.Unlock()
	k.queue.Add(pod.UID)
}

// activePods are the pods whose claims the DRA manager must keep
// prepared: not deleted and not done.
func (k *Kubelet) activePods() []*corev1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*corev1.Pod
	for uid, p := range k.pods {
		if !k.gone.Has(uid) && !terminal(p) {
			out = append(out, p)
		}
	}
	return out
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (k *Kubelet) next(ctx context.Context, recorder record.EventRecorder) bool {
	uid, shutdown := k.queue.Get()
	if shutdown {
		return false
	}
	defer k.queue.Done(uid)
	k.mu.Lock()
	pod, gone := k.pods[uid], k.gone.Has(uid)
	k.mu.Unlock()
	if pod == nil {
		return true
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KObj(pod), "podUID", uid)
	ctx = klog.NewContext(ctx, logger)
	var err error
	switch {
	case gone:
		if err = k.manager.UnprepareResources(ctx, pod); err == nil {
			k.forget(uid)
		}
	case pod.DeletionTimestamp != nil || terminal(pod):
		err = k.terminate(ctx, pod)
	default:
		err = k.run(ctx, pod)
		if err != nil {
			recorder.Eventf(pod, corev1.EventTypeWarning, events.FailedPrepareDynamicResources, "Failed to prepare dynamic resources: %v", err)
		}
	}
	if err != nil && ctx.Err() == nil {
		logger.Info("Syncing the pod failed, retrying", "err", err, "after", k.RetryPeriod)
		k.queue.AddAfter(uid, k.RetryPeriod)
	}
	return true
}

// run prepares a pod's claims and "starts" its containers: records the
// CDI devices each gets and reports the pod Running. Reporting it can
// fail after the claims were prepared; the retry reports it again.
func (k *Kubelet) run(ctx context.Context, pod *corev1.Pod) error {
	k.mu.Lock()
	_, running := k.cdi[pod.UID]
	k.mu.Unlock()
	if !running {
		if err := k.manager.PrepareResources(ctx, pod); err != nil {
			return err
		}
		devices := map[string][]string{}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			info, err := k.manager.GetResources(pod, c)
			if err != nil {
				return err
			}
			for _, d := range info.CDIDevices {
				devices[c.Name] = append(devices[c.Name], d.Name)
			}
		}
		k.mu.Lock()
		k.cdi[pod.UID] = devices
		k.mu.Unlock()
	}
	if pod.Status.Phase == corev1.PodRunning {
		return nil
	}
	return k.setPhase(ctx, pod, corev1.PodRunning)
}

// terminate unprepares the claims of a pod that is done or being deleted,
// then reports it done, then removes a deleted pod: in this order the
// resourceclaim controller never deallocates a claim still prepared.
func (k *Kubelet) terminate(ctx context.Context, pod *corev1.Pod) error {
	if err := k.manager.UnprepareResources(ctx, pod); err != nil {
		return err
	}
	k.mu.Lock()
	delete(k.cdi, pod.UID)
	k.mu.Unlock()
	if !terminal(pod) {
		if err := k.setPhase(ctx, pod, corev1.PodSucceeded); err != nil {
			return err
		}
	}
	if pod.DeletionTimestamp == nil {
		return nil
	}
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	return k.replaced(ctx, pod, err)
}

// replaced makes nil of a write's error when the pod is gone or is a new
// pod of the same name (the UID precondition failed: a conflict); any
// other conflict is returned, to be retried, as the kubelet's status
// manager retries until its status is stored.
func (k *Kubelet) replaced(ctx context.Context, pod *corev1.Pod, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err) || apierrors.IsInvalid(err):
		cur, gerr := k.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) || (gerr == nil && cur.UID != pod.UID) {
			return nil
		}
	}
	return err
}

func (k *Kubelet) setPhase(ctx context.Context, pod *corev1.Pod, phase corev1.PodPhase) error {
	// The UID in the patch is a precondition: a new pod of the same name
	// refuses it as a change of an immutable field.
	patch := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"phase":%q}}`, pod.UID, phase)
	_, err := k.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return k.replaced(ctx, pod, err)
}

func (k *Kubelet) forget(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.pods, uid)
	delete(k.cdi, uid)
	k.gone.Delete(uid)
}
