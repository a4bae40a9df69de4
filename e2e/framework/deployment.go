package framework

import (
	"context"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/replicaset"
)

// DeploymentControllers are kube-controller-manager's deployment and
// replicaset controllers: a Deployment gets its ReplicaSet and the
// ReplicaSet its pods, which the scheduler then places. Set up as
// kube-controller-manager sets them up (their own clients and user
// agents, shared informers, its default of 5 workers each and its burst
// of 500 replicas).
type DeploymentControllers struct{}

func (DeploymentControllers) Name() string { return "deployment and replicaset controllers" }

func (DeploymentControllers) Start(ctx context.Context, cp *ControlPlane) error {
	dClient, err := kubernetes.NewForConfig(cp.ClientConfig("deployment-controller"))
	if err != nil {
		return err
	}
	rsClient, err := kubernetes.NewForConfig(cp.ClientConfig("replicaset-controller"))
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(dClient, 0)
	dc, err := deployment.NewDeploymentController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), dClient)
	if err != nil {
		return fmt.Errorf("creating the deployment controller: %w", err)
	}
	rsc := replicaset.NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), rsClient, replicaset.BurstReplicas)
	if err := startInformers(ctx, factory); err != nil {
		return err
	}
	go dc.Run(ctx, 5)
	go rsc.Run(ctx, 5)
	return nil
}
