package framework

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
)

// ResourceClaimController is kube-controller-manager's resourceclaim
// controller: it creates the ResourceClaims of pods' claim templates and
// records them in pod status; when a pod is done (terminal phase) or gone,
// it takes the pod out of its claims' reservedFor, deallocates claims that
// nobody uses any more, and deletes the generated claims of pods that are
// done. (Generated claims of pods already gone are left to the garbage
// collector, which the control plane does not run: they stay,
// deallocated.) A pod that is Terminating still holds its claims: without
// a kubelet, a test ends a pod's life as the kubelet would: a terminal
// phase in the pod's status, then a delete with grace period zero. It is
// set up as kube-controller-manager sets it up (shared informers, writes
// as its own ServiceAccount under its bootstrap role, the default of 10
// workers).
type ResourceClaimController struct {
	// Workers defaults to kube-controller-manager's 10.
	Workers int
}

func (ResourceClaimController) Name() string { return "resourceclaim controller" }

func (c ResourceClaimController) Start(ctx context.Context, cp *ControlPlane) error {
	client, _, factory, err := cp.controllerClientsets("resource-claim-controller")
	if err != nil {
		return err
	}
	ctrl, err := resourceclaim.NewController(klog.FromContext(ctx), client,
		factory.Core().V1().Pods(),
		factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(),
		factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		return fmt.Errorf("creating the controller: %w", err)
	}
	if err := startInformers(ctx, factory); err != nil {
		return err
	}
	workers := c.Workers
	if workers == 0 {
		workers = 10
	}
	go ctrl.Run(ctx, workers)
	return nil
}
