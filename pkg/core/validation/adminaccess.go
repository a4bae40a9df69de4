package validation

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AdminAccessRequest is the first request of a claim's spec that asks
// for admin access, with the path kube-apiserver reports it at
// (spec.devices.requests[i].adminAccess, the request rather than its
// exactly field), or nil. Subrequests cannot ask for it.
func AdminAccessRequest(dc *resourcev1.DeviceClaim, spec *field.Path) *field.Path {
	for i := range dc.Requests {
		if e := dc.Requests[i].Exactly; e != nil && e.AdminAccess != nil && *e.AdminAccess {
			return spec.Child("devices", "requests").Index(i).Child("adminAccess")
		}
	}
	return nil
}

// AdminAccessResult is the first result of an allocation with admin
// access, as a path, or nil.
func AdminAccessResult(a *resourcev1.AllocationResult) *field.Path {
	if a == nil {
		return nil
	}
	for i := range a.Devices.Results {
		if r := a.Devices.Results[i].AdminAccess; r != nil && *r {
			return field.NewPath("status", "allocation", "devices", "results").Index(i).Child("adminAccess")
		}
	}
	return nil
}

// AdminAccessNamespace refuses admin access at path (from
// AdminAccessRequest or AdminAccessResult) in a namespace whose labels
// lack resource.kubernetes.io/admin-access: "true". That label is what
// lets a namespace's ResourceClaims and ResourceClaimTemplates ask for
// admin access to devices (KEP-5018 "DRA: AdminAccess for ResourceClaims
// and ResourceClaimTemplates"): kube-apiserver refuses them on create in
// any other namespace, and refuses an allocation with admin access
// written into a claim's status there.
func AdminAccessNamespace(path *field.Path, namespace string, labels map[string]string) field.ErrorList {
	if path == nil || labels[resourcev1.DRAAdminNamespaceLabelKey] == "true" {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf("admin access to devices is granted only in a namespace labelled %s: \"true\", and Namespace %s is not", resourcev1.DRAAdminNamespaceLabelKey, namespace))}
}
