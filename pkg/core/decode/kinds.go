package decode

import (
	"reflect"
	"sort"
	"strings"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/workload"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kindInfo describes one kind dractl judges, at one API version.
type kindInfo struct {
	apiVersion string
	kind       string
	namespaced bool
	typ        reflect.Type // the struct type; decoding allocates a *typ
	// older is set for the resource.k8s.io versions before v1: objects
	// decode into their own type (so errors name the fields as written) and
	// are then converted to v1 (pkg/core/convert).
	older bool
	// fast is set for the kinds whose objects the fast decoder produces
	// exactly as the strict one does (fastjson.go).
	fast bool
}

var (
	v1beta1 = resourcev1beta1.SchemeGroupVersion.String()
	v1beta2 = resourcev1beta2.SchemeGroupVersion.String()
	// v1alpha3 is served for DeviceTaintRules alone.
	v1alpha3 = resourcev1alpha3.SchemeGroupVersion.String()
)

// kinds are the kinds dractl judges. Every version kube-apiserver 1.37
// serves for the resource.k8s.io kinds is read; all become v1 objects.
var kinds = []kindInfo{
	{api.APIVersion, api.KindSlice, false, reflect.TypeFor[api.ResourceSlice](), false, true},
	{api.APIVersion, "DeviceClass", false, reflect.TypeFor[resourcev1.DeviceClass](), false, false},
	{api.APIVersion, "ResourceClaim", true, reflect.TypeFor[resourcev1.ResourceClaim](), false, false},
	{api.APIVersion, "ResourceClaimTemplate", true, reflect.TypeFor[resourcev1.ResourceClaimTemplate](), false, false},
	{api.APIVersion, "DeviceTaintRule", false, reflect.TypeFor[resourcev1.DeviceTaintRule](), false, false},
	{v1beta2, api.KindSlice, false, reflect.TypeFor[resourcev1beta2.ResourceSlice](), true, false},
	{v1beta2, "DeviceClass", false, reflect.TypeFor[resourcev1beta2.DeviceClass](), true, false},
	{v1beta2, "ResourceClaim", true, reflect.TypeFor[resourcev1beta2.ResourceClaim](), true, false},
	{v1beta2, "ResourceClaimTemplate", true, reflect.TypeFor[resourcev1beta2.ResourceClaimTemplate](), true, false},
	{v1beta2, "DeviceTaintRule", false, reflect.TypeFor[resourcev1beta2.DeviceTaintRule](), true, false},
	{v1beta1, api.KindSlice, false, reflect.TypeFor[resourcev1beta1.ResourceSlice](), true, false},
	{v1beta1, "DeviceClass", false, reflect.TypeFor[resourcev1beta1.DeviceClass](), true, false},
	{v1beta1, "ResourceClaim", true, reflect.TypeFor[resourcev1beta1.ResourceClaim](), true, false},
	{v1beta1, "ResourceClaimTemplate", true, reflect.TypeFor[resourcev1beta1.ResourceClaimTemplate](), true, false},
	{v1alpha3, "DeviceTaintRule", false, reflect.TypeFor[resourcev1alpha3.DeviceTaintRule](), true, false},
	{"v1", "Node", false, reflect.TypeFor[corev1.Node](), false, false},
	{"v1", "Pod", true, reflect.TypeFor[corev1.Pod](), false, false},
	// dractl's own kind: what dractl simulate reads (pkg/core/workload).
	{workload.APIVersion, workload.Kind, true, reflect.TypeFor[workload.Workload](), false, false},
}

func lookupKind(apiVersion, kind string) *kindInfo {
	for i := range kinds {
		if kinds[i].apiVersion == apiVersion && kinds[i].kind == kind {
			return &kinds[i]
		}
	}
	return nil
}

// judged reports whether dractl has rules for kind in apiVersion's group.
// Objects of other kinds are read leniently; a judged kind at a version
// dractl does not read is an error, since its rules could not be applied.
func judged(apiVersion, kind string) bool {
	group := groupOf(apiVersion)
	for _, k := range kinds {
		if k.kind == kind && groupOf(k.apiVersion) == group {
			return true
		}
	}
	return false
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return apiVersion
	}
	return gv.Group
}

// kindError explains why a judged kind's apiVersion is not read, naming
// the versions that are.
func kindError(apiVersion, kind string) string {
	var versions []string
	for _, k := range kinds {
		if k.kind == kind {
			versions = append(versions, k.apiVersion)
		}
	}
	sort.Strings(versions)
	return "unsupported apiVersion " + quote(apiVersion) + " for kind " + kind + "; expected " + strings.Join(versions, ", ")
}

func quote(s string) string { return "\"" + s + "\"" }

// isList reports whether apiVersion/kind is a list, and of which kind
// (empty for a v1 List, whose items name their own kinds).
func isList(apiVersion, kind string) (list bool, itemKind string) {
	if kind == "List" && apiVersion == "v1" {
		return true, ""
	}
	if base, ok := strings.CutSuffix(kind, "List"); ok && base != "" {
		return true, base
	}
	return false, ""
}

// apiObject is what every supported type offers: all embed
// metav1.TypeMeta and metav1.ObjectMeta.
type apiObject interface {
	metav1.Object
	GetObjectKind() schema.ObjectKind
}
