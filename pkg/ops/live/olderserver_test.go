package live_test

import (
	"context"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dractl/dractl/pkg/ops/live"
)

// TestTaintRulesOfAnOlderServer: a kube-apiserver 1.36 serves
// DeviceTaintRules in resource.k8s.io/v1beta2 only. With none there, the
// cluster has none to show; with one, reading on would show its devices
// untainted, so the list fails naming the version.
func TestTaintRulesOfAnOlderServer(t *testing.T) {
	rule := &resourcev1beta2.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "maintenance"}}
	for _, tc := range []struct {
		name  string
		rules []runtime.Object
		want  string
	}{
		{"no rules", nil, ""},
		{"a rule in v1beta2", []runtime.Object{rule},
			"cannot list devicetaintrules.resource.k8s.io: kube-apiserver v1.36.3 holds DeviceTaintRules in resource.k8s.io/v1beta2, which dractl does not read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.rules...)
			d := cs.Discovery().(*fakediscovery.FakeDiscovery)
			d.FakedServerVersion = &version.Info{GitVersion: "v1.36.3", EmulationMajor: "1", EmulationMinor: "36"}
			d.Resources = []*metav1.APIResourceList{
				{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "resourceslices"}, {Name: "resourceclaims"}}},
				{GroupVersion: "resource.k8s.io/v1beta2", APIResources: []metav1.APIResource{{Name: "devicetaintrules"}}},
			}
			// kube-apiserver 1.36 has no resource.k8s.io/v1 DeviceTaintRules.
			cs.PrependReactor("list", "devicetaintrules", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetResource().Version == "v1" {
					return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "devicetaintrules"}, "")
				}
				return false, nil, nil
			})
			rules, err := live.NewClientFor(cs, "https://cluster").TaintRules(context.Background())
			if tc.want == "" {
				if err != nil || len(rules) != 0 {
					t.Fatalf("TaintRules = %v, %v; want none", rules, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("TaintRules: %v; want %q", err, tc.want)
			}
		})
	}
}

// TestSlicesOfAPoolOnAnOlderServer: kube-apiserver before 1.37 has no
// spec.pool.name field label and refuses a selector with it; the pool's
// slices are then selected from the driver's.
func TestSlicesOfAPoolOnAnOlderServer(t *testing.T) {
	slice := func(name, driver, pool string) runtime.Object {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver, Pool: resourcev1.ResourcePool{Name: pool}}}
	}
	cs := fake.NewClientset(slice("a", "gpu.example.com", "node-1"), slice("b", "gpu.example.com", "node-2"), slice("c", "nic.example.com", "node-1"))
	var selectors []string
	cs.PrependReactor("list", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
		selectors = append(selectors, sel.String())
		if _, ok := sel.RequiresExactMatch("spec.pool.name"); ok {
			return true, nil, apierrors.NewBadRequest(`field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.pool.name`)
		}
		// The fake does not select; kube-apiserver does.
		list, err := cs.Tracker().List(a.GetResource(), a.GetResource().GroupVersion().WithKind("ResourceSlice"), "")
		if err != nil {
			return true, nil, err
		}
		out := &resourcev1.ResourceSliceList{}
		for _, s := range list.(*resourcev1.ResourceSliceList).Items {
			if d, ok := sel.RequiresExactMatch("spec.driver"); !ok || s.Spec.Driver == d {
				out.Items = append(out.Items, s)
			}
		}
		return true, out, nil
	})
	got, err := live.NewClientFor(cs, "https://cluster").Slices(context.Background(), "spec.driver=gpu.example.com,spec.pool.name=node-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("slices %v, want [a]", got)
	}
	if len(selectors) < 2 || selectors[len(selectors)-1] != "spec.driver=gpu.example.com" {
		t.Errorf("selectors asked %v, want the driver's last", selectors)
	}
}
