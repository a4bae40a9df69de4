// Package fakeapi is client-go's fake clientset as a DRA driver meets
// kube-apiserver: ResourceSlices get generated names, and discovery
// answers over HTTP as a server of resource.k8s.io/v1 does (its version,
// the group's resources, the group's OpenAPI v3 schema), which the fake's
// own discovery cannot (it has no OpenAPI v3).
package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// Server is what discovery answers.
type Server struct {
	Version version.Info
	// Resources of resource.k8s.io/v1; nil: the group version is not
	// served (nor its schema).
	Resources []string
	// Schema is the OpenAPI v3 document of resource.k8s.io/v1.
	Schema string
	// Objects are served as JSON at their paths
	// (/api/v1/nodes/node-1), for requests other than discovery.
	Objects map[string]any
}

// AnyFields is a schema of resource.k8s.io/v1 whose ResourceSlice takes
// any field, as the fake clientset stores any.
const AnyFields = `{"openapi":"3.0.0","components":{"schemas":{"io.k8s.api.resource.v1.ResourceSlice":{"type":"object"}}}}`

// Release is what a kube-apiserver of Kubernetes 1.<minor> reports at
// /version.
func Release(gitVersion string, minor int) version.Info {
	m := fmt.Sprint(minor)
	return version.Info{Major: "1", Minor: m, GitVersion: gitVersion, EmulationMajor: "1", EmulationMinor: m}
}

// Served are the resources kube-apiserver serves in resource.k8s.io/v1.
var Served = []string{"deviceclasses", "devicetaintrules", "resourceclaims", "resourceclaimtemplates", "resourceslices"}

// Default is a kube-apiserver 1.37.2 that takes any field.
var Default = Server{Version: Release("v1.37.2", 37), Resources: Served, Schema: AnyFields}

// Serve starts an HTTP server answering discovery as s; the caller closes
// it.
func (s Server) Serve() *httptest.Server {
	mux := http.NewServeMux()
	serveJSON := func(path string, v any) {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		})
	}
	serveJSON("/version", s.Version)
	for path, obj := range s.Objects {
		serveJSON(path, obj)
	}
	if s.Resources != nil {
		list := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "resource.k8s.io/v1"}
		for _, r := range s.Resources {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r, Kind: r, Verbs: []string{"create", "get", "list", "watch"}})
		}
		serveJSON("/apis/resource.k8s.io/v1", list)
		serveJSON("/openapi/v3", map[string]any{"paths": map[string]any{
			"apis/resource.k8s.io/v1": map[string]string{"serverRelativeURL": "/openapi/v3/apis/resource.k8s.io/v1?hash=1"}}})
		mux.HandleFunc("/openapi/v3/apis/resource.k8s.io/v1", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(s.Schema))
		})
	}
	return httptest.NewServer(mux)
}

// Discovery is a discovery client of the HTTP server srv.
func Discovery(srv *httptest.Server) *discovery.DiscoveryClient {
	return discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})
}

// Clientset is a fake clientset whose discovery is a Server's.
type Clientset struct {
	*fake.Clientset
	discovery *discovery.DiscoveryClient
	srv       *httptest.Server
}

// Discovery answers as the Server does.
func (c *Clientset) Discovery() discovery.DiscoveryInterfaces { return c.discovery }

// Close stops the discovery server.
func (c *Clientset) Close() { c.srv.Close() }

// NewClientset returns a fake clientset holding objs, whose discovery
// answers as s does and which names the ResourceSlices it creates from
// their generateName, as kube-apiserver does.
func NewClientset(s Server, objs ...runtime.Object) *Clientset {
	client := fake.NewClientset(objs...)
	var generated atomic.Int64
	client.PrependReactor("create", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if sl := action.(k8stesting.CreateAction).GetObject().(*resourcev1.ResourceSlice); sl.Name == "" {
			sl.Name = fmt.Sprintf("%s%d", sl.GenerateName, generated.Add(1))
		}
		return false, nil, nil
	})
	srv := s.Serve()
	return &Clientset{Clientset: client, discovery: Discovery(srv), srv: srv}
}
