package convert

import (
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
)

// sliceFromV1beta1 lifts every device's "basic" fields up into the device.
// The spec's nodeName and allNodes are a plain string and bool in v1beta1
// and pointers in v1; their zero values are omitted in JSON, so the
// re-encoding maps "" and false to unset as the API server does.
func sliceFromV1beta1(in *resourcev1beta1.ResourceSlice) (*resourcev1.ResourceSlice, error) {
	rest := *in
	rest.Spec.Devices = nil
	out := &resourcev1.ResourceSlice{}
	if err := recode(&rest, out); err != nil {
		return nil, err
	}
	if in.Spec.Devices != nil {
		out.Spec.Devices = make([]resourcev1.Device, len(in.Spec.Devices))
	}
	for i := range in.Spec.Devices {
		d := &in.Spec.Devices[i]
		if d.Basic != nil {
			if err := recode(d.Basic, &out.Spec.Devices[i]); err != nil {
				return nil, err
			}
		}
		out.Spec.Devices[i].Name = d.Name
	}
	return out, nil
}

func claimFromV1beta1(in *resourcev1beta1.ResourceClaim) (*resourcev1.ResourceClaim, error) {
	rest := *in
	rest.Spec = resourcev1beta1.ResourceClaimSpec{}
	out := &resourcev1.ResourceClaim{}
	if err := recode(&rest, out); err != nil {
		return nil, err
	}
	spec, err := claimSpecFromV1beta1(&in.Spec)
	if err != nil {
		return nil, err
	}
	out.Spec = spec
	return out, nil
}

func templateFromV1beta1(in *resourcev1beta1.ResourceClaimTemplate) (*resourcev1.ResourceClaimTemplate, error) {
	rest := *in
	rest.Spec.Spec = resourcev1beta1.ResourceClaimSpec{}
	out := &resourcev1.ResourceClaimTemplate{}
	if err := recode(&rest, out); err != nil {
		return nil, err
	}
	spec, err := claimSpecFromV1beta1(&in.Spec.Spec)
	if err != nil {
		return nil, err
	}
	out.Spec.Spec = spec
	return out, nil
}

// claimSpecFromV1beta1 moves each request's ExactCount fields under
// "exactly". As in kube-apiserver, any of them being set makes an exactly
// section (validation then judges it), and the v1beta1 defaults (mode
// ExactCount and count 1, for requests that name a class) come first.
func claimSpecFromV1beta1(in *resourcev1beta1.ResourceClaimSpec) (resourcev1.ResourceClaimSpec, error) {
	rest := *in
	rest.Devices.Requests = nil
	var out resourcev1.ResourceClaimSpec
	if err := recode(&rest, &out); err != nil {
		return out, err
	}
	if in.Devices.Requests != nil {
		out.Devices.Requests = make([]resourcev1.DeviceRequest, len(in.Devices.Requests))
	}
	for i := range in.Devices.Requests {
		r := in.Devices.Requests[i].DeepCopy()
		if r.DeviceClassName != "" {
			r.AllocationMode, r.Count = defaultMode(r.AllocationMode, r.Count)
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			sub.AllocationMode, sub.Count = defaultMode(sub.AllocationMode, sub.Count)
		}
		o := &out.Devices.Requests[i]
		o.Name = r.Name
		if r.FirstAvailable != nil {
			if err := recode(r.FirstAvailable, &o.FirstAvailable); err != nil {
				return out, err
			}
		}
		if hasExactFields(r) {
			o.Exactly = &resourcev1.ExactDeviceRequest{}
			if err := recodeWithout(r, o.Exactly, "name", "firstAvailable"); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// hasExactFields: the v1beta1 request fields that v1 keeps under exactly.
func hasExactFields(r *resourcev1beta1.DeviceRequest) bool {
	return r.DeviceClassName != "" || r.Selectors != nil || r.AllocationMode != "" || r.Count != 0 ||
		r.AdminAccess != nil || r.Tolerations != nil || r.Capacity != nil || r.DerivedAttributes != nil
}
