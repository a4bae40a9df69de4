package decode

import (
	"reflect"
	"sort"
	"strings"

	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/workload"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kindInfo describes one supported kind.
type kindInfo struct {
	apiVersion string
	kind       string
	namespaced bool
	typ        reflect.Type // the struct type; decoding allocates a *typ
}

var kinds = []kindInfo{
	{api.APIVersion, api.KindSlice, false, reflect.TypeFor[api.ResourceSlice]()},
	{api.APIVersion, "DeviceClass", false, reflect.TypeFor[resourcev1.DeviceClass]()},
	{api.APIVersion, "ResourceClaim", true, reflect.TypeFor[resourcev1.ResourceClaim]()},
	{api.APIVersion, "ResourceClaimTemplate", true, reflect.TypeFor[resourcev1.ResourceClaimTemplate]()},
	{"v1", "Node", false, reflect.TypeFor[corev1.Node]()},
	{"v1", "Pod", true, reflect.TypeFor[corev1.Pod]()},
	{workload.APIVersion, workload.Kind, true, reflect.TypeFor[workload.Workload]()},
}

func lookupKind(apiVersion, kind string) *kindInfo {
	for i := range kinds {
		if kinds[i].apiVersion == apiVersion && kinds[i].kind == kind {
			return &kinds[i]
		}
	}
	return nil
}

// kindError explains why apiVersion/kind is not supported, naming what is.
func kindError(apiVersion, kind string) string {
	var versions []string
	for _, k := range kinds {
		if k.kind == kind {
			versions = append(versions, k.apiVersion)
		}
	}
	if len(versions) > 0 {
		return "unsupported apiVersion " + quote(apiVersion) + " for kind " + kind + "; expected " + strings.Join(versions, " or ")
	}
	var all []string
	for _, k := range kinds {
		all = append(all, k.apiVersion+" "+k.kind)
	}
	sort.Strings(all)
	return "unsupported kind " + quote(kind) + " (apiVersion " + quote(apiVersion) + "); supported: " + strings.Join(all, ", ") + ", and lists of them"
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
