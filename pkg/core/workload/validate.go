package workload

import (
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SetDefaults fills in what a Workload leaves out.
func SetDefaults(w *Workload) {
	if w.Spec.MeanInterarrival == nil {
		w.Spec.MeanInterarrival = &metav1.Duration{Duration: DefaultInterarrival}
	}
}

// Validate checks a Workload the way admission would check a built-in
// kind: every problem, each with its field path.
func Validate(w *Workload) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&w.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	if w.Spec.Pods <= 0 || w.Spec.Pods > MaxPods {
		allErrs = append(allErrs, field.Invalid(spec.Child("pods"), w.Spec.Pods, "must be between 1 and 10000000"))
	}
	allErrs = append(allErrs, positive(spec.Child("meanInterarrival"), w.Spec.MeanInterarrival)...)
	allErrs = append(allErrs, positive(spec.Child("meanLifetime"), w.Spec.MeanLifetime)...)
	mix := spec.Child("mix")
	switch {
	case len(w.Spec.Mix) == 0:
		allErrs = append(allErrs, field.Required(mix, "at least one kind of pod"))
	case len(w.Spec.Mix) > MaxMixEntries:
		allErrs = append(allErrs, field.TooMany(mix, len(w.Spec.Mix), MaxMixEntries))
	}
	names := map[string]bool{}
	for i, e := range w.Spec.Mix {
		p := mix.Index(i)
		for _, msg := range apivalidation.NameIsDNSLabel(e.Name, false) {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), e.Name, msg))
		}
		if names[e.Name] {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), e.Name))
		}
		names[e.Name] = true
		if e.Weight <= 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("weight"), e.Weight, "must be positive"))
		}
		if len(e.ResourceClaimTemplates) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("resourceClaimTemplates"), "at least one template"))
		}
		for j, t := range e.ResourceClaimTemplates {
			for _, msg := range apivalidation.NameIsDNSSubdomain(t, false) {
				allErrs = append(allErrs, field.Invalid(p.Child("resourceClaimTemplates").Index(j), t, msg))
			}
		}
		allErrs = append(allErrs, positive(p.Child("meanLifetime"), e.MeanLifetime)...)
	}
	return allErrs
}

func positive(p *field.Path, d *metav1.Duration) field.ErrorList {
	if d != nil && d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be a positive duration")}
	}
	return nil
}

// ParseDuration reads an arrival or lifetime annotation.
func ParseDuration(p *field.Path, s string) (time.Duration, *field.Error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, field.Invalid(p, s, "must be a non-negative Go duration such as 90s or 1h30m")
	}
	return d, nil
}
