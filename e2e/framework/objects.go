package framework

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// Apply applies every manifest in the files or directories (.yaml) with
// server-side apply, as `kubectl apply --server-side -f` does, and returns
// the applied objects.
func (cp *ControlPlane) Apply(tb testing.TB, paths ...string) []*unstructured.Unstructured {
	tb.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		tb.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		tb.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, file := range manifestFiles(tb, paths) {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err == io.EOF {
				break
			} else if err != nil {
				tb.Fatalf("%s: %v", file, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				tb.Fatalf("%s: %s: %v", file, gvk, err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == "namespace" {
				ns := obj.GetNamespace()
				if ns == "" {
					ns = metav1.NamespaceDefault
				}
				ri = dyn.Resource(m.Resource).Namespace(ns)
			}
			body, err := obj.MarshalJSON()
			if err != nil {
				tb.Fatal(err)
			}
			applied, err := ri.Patch(cp.ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "e2e", Force: ptr.To(true)})
			if err != nil {
				tb.Fatalf("%s: applying %s %s: %v", file, gvk.Kind, obj.GetName(), err)
			}
			out = append(out, applied)
		}
	}
	return out
}

func manifestFiles(tb testing.TB, paths []string) []string {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			tb.Fatal(err)
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.yaml"))
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, matches...)
	}
	return files
}

// ServiceAccount returns a client configuration that authenticates as a
// ServiceAccount with a token from the TokenRequest API, bound to no
// object; the account is created if needed. What it may do is whatever
// RBAC grants it. A component that runs in a pod gets its token from
// ServiceAccountOnNode.
func (cp *ControlPlane) ServiceAccount(tb testing.TB, namespace, name string) *rest.Config {
	tb.Helper()
	cp.ensureServiceAccount(tb, namespace, name)
	return cp.token(tb, namespace, name, authenticationv1.TokenRequestSpec{})
}

// ServiceAccountOnNode returns a client configuration with the token the
// kubelet projects into a pod of the ServiceAccount scheduled on node: it
// creates that pod (on a real Node, a busybox container on the host
// network that waits; a framework Kubelet reports it running) and
// requests a token bound to it. kube-apiserver
// then names the pod and its node in the requester's user info
// (authentication.kubernetes.io/node-name), which admission policies may
// check, and refuses the token once the pod is gone.
func (cp *ControlPlane) ServiceAccountOnNode(tb testing.TB, namespace, name, node string) *rest.Config {
	tb.Helper()
	cp.ensureServiceAccount(tb, namespace, name)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-" + node},
		Spec: corev1.PodSpec{
			ServiceAccountName: name,
			NodeName:           node,
			HostNetwork:        true,
			// The component the token is for runs beside it, as the
			// test starts it.
			Containers: []corev1.Container{{Name: "main", Image: BusyboxImage,
				Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"}}},
			TerminationGracePeriodSeconds: ptr.To[int64](5),
		},
	}
	pod, err := cp.Client.CoreV1().Pods(namespace).Create(cp.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("the pod of %s/%s on %s: %v", namespace, name, node, err)
	}
	return cp.token(tb, namespace, name, authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	})
}

func (cp *ControlPlane) ensureServiceAccount(tb testing.TB, namespace, name string) {
	tb.Helper()
	if _, err := cp.Client.CoreV1().Namespaces().Create(cp.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cp.Client.CoreV1().ServiceAccounts(namespace).Create(cp.ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
}

func (cp *ControlPlane) token(tb testing.TB, namespace, name string, spec authenticationv1.TokenRequestSpec) *rest.Config {
	tb.Helper()
	spec.ExpirationSeconds = ptr.To[int64](3600)
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(cp.ctx, name,
		&authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = tr.Status.Token
	cfg.UserAgent = fmt.Sprintf("e2e/%s/%s", namespace, name)
	return cfg
}
