package framework

import (
	"context"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
)

// ResourceClaimController is kube-controller-manager's resourceclaim
// controller: it creates the ResourceClaims of pods' claim templates,
// records them in pod status and deletes them with their pods. It is set
// up as kube-controller-manager sets it up (its own client and user agent,
// shared informers, the default of 10 workers).
type ResourceClaimController struct {
	// Workers defaults to kube-controller-manager's 10.
	Workers int
}

func (ResourceClaimController) Name() string { return "resourceclaim controller" }

func (c ResourceClaimController) Start(ctx context.Context, cp *ControlPlane) error {
	client, err := kubernetes.NewForConfig(cp.ClientConfig("resource-claim-controller"))
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := resourceclaim.NewController(klog.FromContext(ctx), client,
		factory.Core().V1().Pods(),
		factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(),
		factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		return fmt.Errorf("creating the controller: %w", err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	workers := c.Workers
	if workers == 0 {
		workers = 10
	}
	go ctrl.Run(ctx, workers)
	return nil
}
