package framework

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/certificates/rootcacertpublisher"
	"k8s.io/kubernetes/pkg/controller/serviceaccount"
)

// ServiceAccountController is kube-controller-manager's serviceaccount
// controller: it creates the "default" ServiceAccount of every namespace,
// without which the ServiceAccount admission plugin rejects pods. Every
// control plane runs it; Start returns once default/default exists.
type ServiceAccountController struct{}

func (ServiceAccountController) Name() string { return "serviceaccount controller" }

func (ServiceAccountController) Start(ctx context.Context, cp *ControlPlane) error {
	client, read, factory, err := cp.controllerClientsets("service-account-controller")
	if err != nil {
		return err
	}
	ctrl, err := serviceaccount.NewServiceAccountsController(klog.FromContext(ctx),
		factory.Core().V1().ServiceAccounts(), factory.Core().V1().Namespaces(),
		client, serviceaccount.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return fmt.Errorf("creating the controller: %w", err)
	}
	factory.Start(ctx.Done())
	go ctrl.Run(ctx, 1)
	return untilFound(ctx, func(ctx context.Context) error {
		_, err := read.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// RootCAPublisher is kube-controller-manager's root-ca-cert-publisher: it
// puts the cluster's CA (the one of kube-apiserver's serving certificate,
// which in-cluster clients verify at its address) into every namespace's
// kube-root-ca.crt ConfigMap, which every pod's ServiceAccount token
// volume projects, so that a kubelet can mount it. Node starts it once per
// control plane; Start returns once default/kube-root-ca.crt exists.
type RootCAPublisher struct{}

func (RootCAPublisher) Name() string { return "root-ca-cert-publisher" }

func (RootCAPublisher) Start(ctx context.Context, cp *ControlPlane) error {
	client, read, factory, err := cp.controllerClientsets("root-ca-cert-publisher")
	if err != nil {
		return err
	}
	ctrl, err := rootcacertpublisher.NewPublisher(factory.Core().V1().ConfigMaps(), factory.Core().V1().Namespaces(), client, cp.servingCA)
	if err != nil {
		return fmt.Errorf("creating the controller: %w", err)
	}
	factory.Start(ctx.Done())
	go ctrl.Run(ctx, 1)
	return untilFound(ctx, func(ctx context.Context) error {
		_, err := read.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
}

// controllerClientsets are the clientsets of ControllerClients(name):
// the controller's own for its writes, kube-controller-manager's for its
// reads, with an informer factory over the latter.
func (cp *ControlPlane) controllerClientsets(name string) (write, read kubernetes.Interface, factory informers.SharedInformerFactory, err error) {
	readCfg, writeCfg := cp.ControllerClients(name)
	if write, err = kubernetes.NewForConfig(writeCfg); err != nil {
		return nil, nil, nil, err
	}
	if read, err = kubernetes.NewForConfig(readCfg); err != nil {
		return nil, nil, nil, err
	}
	return write, read, informers.NewSharedInformerFactory(read, 0), nil
}

// startInformers starts a factory's informers and waits until each has
// synced, as a controller does before its workers start.
func startInformers(ctx context.Context, factory informers.SharedInformerFactory) error {
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	return nil
}

// untilFound polls get until the object it reads exists.
func untilFound(ctx context.Context, get func(context.Context) error) error {
	return wait.PollUntilContextTimeout(ctx, 50e6, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}
