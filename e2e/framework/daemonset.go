package framework

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/kubernetes/pkg/controller/daemon"
)

// DaemonSetController is kube-controller-manager's daemonset controller:
// a DaemonSet gets a pod on each Node its selector and affinity admit,
// which the scheduler then binds (a real Node's kubelet runs it). Set up
// as kube-controller-manager sets it up: shared informers, writes as its
// own ServiceAccount under its bootstrap role, its back-off of failed
// pods (1 s, doubling to 15 min) and its default of 2 workers.
type DaemonSetController struct{}

func (DaemonSetController) Name() string { return "daemonset controller" }

func (DaemonSetController) Start(ctx context.Context, cp *ControlPlane) error {
	client, _, factory, err := cp.controllerClientsets("daemon-set-controller")
	if err != nil {
		return err
	}
	apps := factory.Apps().V1()
	ctrl, err := daemon.NewDaemonSetsController(ctx, apps.DaemonSets(), apps.ControllerRevisions(),
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(), client, flowcontrol.NewBackOff(time.Second, 15*time.Minute))
	if err != nil {
		return fmt.Errorf("creating the controller: %w", err)
	}
	if err := startInformers(ctx, factory); err != nil {
		return err
	}
	go ctrl.Run(ctx, 2)
	return nil
}
