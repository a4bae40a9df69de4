// Package convert turns the older resource.k8s.io versions that
// kube-apiserver 1.37 still serves (v1beta1, v1beta2) into resource.k8s.io/v1,
// the way the API server does when an object written at an older version is
// read back at v1: the older version's defaults first, then the conversion.
// The v1 defaults are the caller's (pkg/core/decode applies them to every v1
// object).
//
// v1beta2 has exactly the shape of v1 (v1 was made from it), so its objects
// are re-encoded field for field. v1beta1 differs in two places, both moved
// here by hand: a device's fields sit under "basic", and a request states
// its ExactCount fields directly instead of under "exactly". The shape
// claims are checked by this package's tests over every field of the types.
package convert

import (
	"encoding/json"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"
)

// UpgradeToV1 converts a v1beta1 or v1beta2 ResourceSlice, DeviceClass,
// ResourceClaim or ResourceClaimTemplate, or a v1beta2 or v1alpha3 DeviceTaintRule, to
// its v1 type. obj is not
// modified. The result has apiVersion resource.k8s.io/v1 and its kind set.
// Any other type is an error.
func UpgradeToV1(obj runtime.Object) (runtime.Object, error) {
	var out runtime.Object
	var err error
	switch in := obj.(type) {
	case *resourcev1beta2.ResourceSlice:
		out, err = recodeNew[resourcev1.ResourceSlice](in)
	case *resourcev1beta2.DeviceClass:
		out, err = recodeNew[resourcev1.DeviceClass](in)
	case *resourcev1beta2.ResourceClaim:
		in = in.DeepCopy()
		defaultV1beta2Spec(&in.Spec)
		out, err = recodeNew[resourcev1.ResourceClaim](in)
	case *resourcev1beta2.ResourceClaimTemplate:
		in = in.DeepCopy()
		defaultV1beta2Spec(&in.Spec.Spec)
		out, err = recodeNew[resourcev1.ResourceClaimTemplate](in)
	case *resourcev1beta2.DeviceTaintRule:
		out, err = recodeNew[resourcev1.DeviceTaintRule](in)
	case *resourcev1alpha3.DeviceTaintRule:
		out, err = recodeNew[resourcev1.DeviceTaintRule](in)
	case *resourcev1beta1.ResourceSlice:
		out, err = sliceFromV1beta1(in)
	case *resourcev1beta1.DeviceClass:
		out, err = recodeNew[resourcev1.DeviceClass](in)
	case *resourcev1beta1.ResourceClaim:
		out, err = claimFromV1beta1(in)
	case *resourcev1beta1.ResourceClaimTemplate:
		out, err = templateFromV1beta1(in)
	default:
		return nil, fmt.Errorf("convert: %T is not an older resource.k8s.io type", obj)
	}
	if err != nil {
		return nil, err
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = kindOf(out)
	}
	out.GetObjectKind().SetGroupVersionKind(resourcev1.SchemeGroupVersion.WithKind(kind))
	return out, nil
}

func kindOf(obj runtime.Object) string {
	switch obj.(type) {
	case *resourcev1.ResourceSlice:
		return "ResourceSlice"
	case *resourcev1.DeviceClass:
		return "DeviceClass"
	case *resourcev1.ResourceClaim:
		return "ResourceClaim"
	case *resourcev1.ResourceClaimTemplate:
		return "ResourceClaimTemplate"
	case *resourcev1.DeviceTaintRule:
		return "DeviceTaintRule"
	}
	return ""
}

// recode copies in into out through their JSON form. It is used only
// between types of the same JSON shape, which the tests prove; a member
// that out does not know is an error rather than a silent loss.
func recode(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("convert: encoding %T: %w", in, err)
	}
	strict, err := kjson.UnmarshalStrict(data, out)
	if err != nil {
		return fmt.Errorf("convert: decoding %T as %T: %w", in, out, err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("convert: %T has fields %T lacks: %v", in, out, strict)
	}
	return nil
}

// recodeWithout is recode with some of in's members left out: those that
// the conversion places elsewhere.
func recodeWithout(in, out any, drop ...string) error {
	data, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("convert: encoding %T: %w", in, err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return fmt.Errorf("convert: %T is not an object: %w", in, err)
	}
	for _, k := range drop {
		delete(members, k)
	}
	return recode(members, out)
}

func recodeNew[T any, PT interface {
	*T
	runtime.Object
}](in any) (runtime.Object, error) {
	out := PT(new(T))
	if err := recode(in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// defaultV1beta2Spec applies the v1beta2 request defaults, which are the
// v1 ones: an unset mode is ExactCount, and ExactCount without a count is
// one device.
func defaultV1beta2Spec(s *resourcev1beta2.ResourceClaimSpec) {
	for i := range s.Devices.Requests {
		r := &s.Devices.Requests[i]
		if r.Exactly != nil {
			r.Exactly.AllocationMode, r.Exactly.Count = defaultMode(r.Exactly.AllocationMode, r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			sub.AllocationMode, sub.Count = defaultMode(sub.AllocationMode, sub.Count)
		}
	}
}

func defaultMode[M ~string](mode M, count int64) (M, int64) {
	if mode == "" {
		mode = "ExactCount"
	}
	if mode == "ExactCount" && count == 0 {
		count = 1
	}
	return mode, count
}
