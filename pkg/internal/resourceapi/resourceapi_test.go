package resourceapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRequire: a server serving resourceslices in resource.k8s.io/v1 is
// taken; one without is refused by name, as older than 1.34 or, from
// 1.34, as having the API turned off.
func TestRequire(t *testing.T) {
	v1 := &metav1.APIResourceList{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "resourceslices"}}}
	beta := &metav1.APIResourceList{GroupVersion: "resource.k8s.io/v1beta2", APIResources: []metav1.APIResource{{Name: "resourceslices"}}}
	for _, tc := range []struct {
		name      string
		git       string
		minor     string
		resources []*metav1.APIResourceList
		want      string // "" when served
	}{
		{"1.37 with v1", "v1.37.2", "37", []*metav1.APIResourceList{v1}, ""},
		{"1.33, beta only", "v1.33.5", "33", []*metav1.APIResourceList{beta},
			"kube-apiserver v1.33.5 does not serve resourceslices in resource.k8s.io/v1 (Kubernetes 1.34 and newer do)"},
		{"1.34 with v1 turned off", "v1.34.4", "34", []*metav1.APIResourceList{beta},
			"kube-apiserver v1.34.4 does not serve resourceslices in resource.k8s.io/v1: the API is turned off there (--runtime-config), which Kubernetes 1.34 and newer serve by default"},
		{"a provider's 1.36+", "v1.36.3-gke.1", "36+", nil,
			"kube-apiserver v1.36.3-gke.1 does not serve resourceslices in resource.k8s.io/v1: the API is turned off there (--runtime-config), which Kubernetes 1.34 and newer serve by default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
			d.FakedServerVersion = &version.Info{GitVersion: tc.git, Major: "1", Minor: tc.minor}
			d.Resources = tc.resources
			err := Require(d, "resourceslices")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Require: %v, want nil", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want || !IsNotServed(err)):
				t.Fatalf("Require: %v\nwant %s", err, tc.want)
			}
		})
	}
}
