package framework

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
)

// GarbageCollector is kube-controller-manager's garbage collector: it
// deletes the dependents of an object deleted with background or
// foreground propagation (a DaemonSet's pods, a Deployment's ReplicaSets
// and their pods), which `helm uninstall` and `kubectl delete` rely on.
// Set up as kube-controller-manager sets it up: its graph of owners built
// from metadata informers of every deletable resource discovery lists
// (as kube-controller-manager, which may list and watch everything), its
// deletes as its own ServiceAccount under its bootstrap role, discovery
// resynced every 30 s, and its default of 20 workers. Start returns once
// its graph has synced.
type GarbageCollector struct{}

func (GarbageCollector) Name() string { return "garbage collector" }

func (GarbageCollector) Start(ctx context.Context, cp *ControlPlane) error {
	readCfg, writeCfg := cp.ControllerClients("generic-garbage-collector")
	read, err := kubernetes.NewForConfig(readCfg)
	if err != nil {
		return err
	}
	write, err := kubernetes.NewForConfig(writeCfg)
	if err != nil {
		return err
	}
	metadataRead, err := metadata.NewForConfig(readCfg)
	if err != nil {
		return err
	}
	metadataWrite, err := metadata.NewForConfig(writeCfg)
	if err != nil {
		return err
	}
	// The mapper's discovery client is not the one Sync polls: Sync
	// resets the mapper when discovery changes.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(read.Discovery()))
	shared := informers.NewSharedInformerFactory(read, 0)
	started := make(chan struct{})
	gc, err := garbagecollector.NewGarbageCollector(ctx, write, metadataWrite, mapper, garbagecollector.DefaultIgnoredResources(),
		informerfactory.NewInformerFactory(shared, metadatainformer.NewSharedInformerFactory(metadataRead, 0)), started)
	if err != nil {
		return fmt.Errorf("creating the garbage collector: %w", err)
	}
	const period = 30 * time.Second
	go gc.Run(ctx, 20, period)
	go gc.Sync(ctx, read.Discovery(), period)
	close(started)
	logger := klog.FromContext(ctx)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return gc.IsSynced(logger), nil
	})
}
