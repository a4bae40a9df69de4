package validation

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// qualifiedKeyMaxPathLength bounds how much of a map key ends up in a field
// path. Keys longer than any valid name are shortened in the middle so that a
// hostile key cannot blow up every message that names it; the error itself
// still carries the full value.
const qualifiedKeyMaxPathLength = QualifiedNameMaxDomainLength + 1 + QualifiedNameMaxIDLength

// probePath stands in for a field path while checking whether a value has
// any problem at all: the checks are pure and use their path only to name
// it in errors, so a check that finds nothing with probePath finds nothing
// with the real path either, which is then built only for values with
// problems. Nothing ever reports an error at probePath.
var probePath = field.NewPath("<probe>")

// keyPath is fldPath.Key(key) with the key shortened like upstream does.
func keyPath(fldPath *field.Path, key string, maxLen int) *field.Path {
	if maxLen < 16 {
		maxLen = 16
	}
	if len(key) > maxLen {
		const ellipsis = "..."
		remaining := maxLen - len(ellipsis)
		key = key[:(remaining+1)/2] + ellipsis + key[len(key)-remaining/2:]
	}
	return fldPath.Key(key)
}

// sortedKeys makes map validation deterministic: the same object always
// yields the same error list, which callers diff and tests compare.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// eachEntry validates every map entry with fn. It walks the map in Go's
// random order and only when that yields two or more errors walks it again
// in key order, so valid objects (the common case) pay for no sorting while
// every error list is still deterministic. fn must not have side effects.
func eachEntry[K cmp.Ordered, V any](m map[K]V, fn func(K, V) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	for k, v := range m {
		errs = append(errs, fn(k, v)...)
	}
	if len(errs) < 2 {
		return errs
	}
	errs = errs[:0]
	for _, k := range sortedKeys(m) {
		errs = append(errs, fn(k, m[k])...)
	}
	return errs
}

// tooMany reports a list that exceeds max. Like kube-apiserver, callers stop
// validating the items of such a list: it bounds the work an oversized
// object can cause.
func tooMany(fldPath *field.Path, n, max int) field.ErrorList {
	if n > max {
		return field.ErrorList{field.TooMany(fldPath, n, max)}
	}
	return nil
}

// duplicates reports every entry whose key was already seen. Empty keys are
// skipped because the entry is already reported as Required.
func duplicates[T any](items []T, key func(*T) string, fldPath *field.Path) field.ErrorList {
	if len(items) < 2 {
		return nil
	}
	var errs field.ErrorList
	seen := make(map[string]struct{}, len(items))
	for i := range items {
		k := key(&items[i])
		if k == "" {
			continue
		}
		if _, dup := seen[k]; dup {
			errs = append(errs, field.Duplicate(fldPath.Index(i), k))
			continue
		}
		seen[k] = struct{}{}
	}
	return errs
}

func stringDuplicates(items []string, fldPath *field.Path) field.ErrorList {
	return duplicates(items, func(s *string) string { return *s }, fldPath)
}

// isDNSLabelFast and isCIdentifierFast accept exactly what the apimachinery
// regular expressions accept. Validation runs them first and only asks
// apimachinery, for its messages, when they fail: names are checked once
// per device, and the regexps dominated the cost of validating a slice.
func isDNSLabelFast(s string) bool {
	if len(s) == 0 || len(s) > validation.DNS1123LabelMaxLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// isDNSSubdomainFast: dot-separated labels of [a-z0-9-] that neither start
// nor end with '-', at most 253 characters. foldCase accepts upper case
// letters too, as the driver name check does.
func isDNSSubdomainFast(s string, foldCase bool) bool {
	if len(s) == 0 || len(s) > validation.DNS1123SubdomainMaxLength {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if i == start || s[start] == '-' || s[i-1] == '-' {
				return false
			}
			start = i + 1
			continue
		}
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case foldCase && c >= 'A' && c <= 'Z':
		default:
			return false
		}
	}
	return true
}

func isCIdentifierFast(s string) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// dnsLabel checks a DNS-1123 label (device, request, counter, mixin names).
func dnsLabel(value string, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if isDNSLabelFast(value) {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// dnsSubdomain checks a DNS-1123 subdomain (device class names, node names).
func dnsSubdomain(value string, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if isDNSSubdomainFast(value, false) {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// driverName follows kube-apiserver, which validates driver names like CSI
// driver names: the docs say they "should" be lower case, but the check runs
// on the lower-cased name, so upper case letters are accepted (v1 API reference: .spec.driver).
func driverName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if len(name) <= DriverNameMaxLength && isDNSSubdomainFast(name, true) {
		return nil
	}
	var errs field.ErrorList
	if len(name) > DriverNameMaxLength {
		errs = append(errs, field.TooLong(fldPath, name, DriverNameMaxLength))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

// poolName: at most 253 characters, DNS subdomains separated by '/'
// (v1 API reference: .spec.pool.name).
func poolName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	if len(name) > PoolNameMaxLength {
		errs = append(errs, field.TooLong(fldPath, name, PoolNameMaxLength))
	}
	for part := range strings.SplitSeq(name, "/") {
		for _, msg := range validation.IsDNS1123Subdomain(part) {
			errs = append(errs, field.Invalid(fldPath, name, msg))
		}
	}
	return errs
}

func cIdentifier(id string, fldPath *field.Path) field.ErrorList {
	if len(id) <= QualifiedNameMaxIDLength && isCIdentifierFast(id) {
		return nil
	}
	var errs field.ErrorList
	if len(id) > QualifiedNameMaxIDLength {
		errs = append(errs, field.TooLong(fldPath, id, QualifiedNameMaxIDLength))
	}
	for _, msg := range content.IsCIdentifier(id) {
		errs = append(errs, field.Invalid(fldPath, id, msg))
	}
	return errs
}

// qualifiedName checks an attribute or capacity name: a C identifier,
// optionally prefixed by a domain that is valid as a driver name and a
// slash (v1 QualifiedName).
func qualifiedName(name string, fldPath *field.Path) field.ErrorList {
	domain, id, found := strings.Cut(name, "/")
	if !found {
		return cIdentifier(name, fldPath)
	}
	if strings.Contains(id, "/") {
		// kube-apiserver 1.37 stores such a name without looking further.
		return field.ErrorList{field.Invalid(fldPath, name, "must not contain more than one slash").WithOrigin(originNameSlashes)}
	}
	var errs field.ErrorList
	if domain == "" {
		errs = append(errs, field.Invalid(fldPath, name, "the domain must not be empty"))
	} else {
		for _, e := range driverName(domain, fldPath) {
			e.BadValue = name
			errs = append(errs, e)
		}
	}
	if id == "" {
		errs = append(errs, field.Invalid(fldPath, name, "the name must not be empty"))
	} else {
		errs = append(errs, cIdentifier(id, fldPath)...)
	}
	return errs
}

// fullyQualifiedName is a qualifiedName that must carry a domain (constraint
// attributes, partitionTypeAttribute).
func fullyQualifiedName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	errs := qualifiedName(name, fldPath)
	if !strings.Contains(name, "/") {
		errs = append(errs, field.Invalid(fldPath, name, "a fully qualified name must be a domain and a name separated by a slash"))
	}
	return errs
}

func labelValue(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// labelName is also what kube-apiserver uses for "a valid condition type
// string" in binding conditions.
func labelName(name string, fldPath *field.Path) field.ErrorList {
	return metav1validation.ValidateLabelName(name, fldPath)
}

// nodeName uses the rules of a Node object's name.
func nodeName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

// nodeSelector reproduces kube-apiserver's ValidateNodeSelector
// (pkg/apis/core/validation): at least one term, label keys,
// operator/value-count rules, and for matchFields only metadata.name with
// In/NotIn and a single valid node name. A slice's own selector must in
// addition have exactly one term (v1 API reference: .spec.nodeSelector), which the
// apiserver reports next to the missing-terms error.
func nodeSelector(ns *corev1.NodeSelector, exactlyOne bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		errs = append(errs, field.Required(termsPath, "must have at least one node selector term"))
	}
	for i, term := range ns.NodeSelectorTerms {
		termPath := termsPath.Index(i)
		for j, req := range term.MatchExpressions {
			errs = append(errs, nodeSelectorRequirement(req, termPath.Child("matchExpressions").Index(j))...)
		}
		for j, req := range term.MatchFields {
			errs = append(errs, nodeFieldSelectorRequirement(req, termPath.Child("matchFields").Index(j))...)
		}
	}
	if exactlyOne && len(ns.NodeSelectorTerms) != 1 {
		errs = append(errs, field.Invalid(termsPath, fmt.Sprintf("%d terms", len(ns.NodeSelectorTerms)), "must have exactly one node selector term"))
	}
	return errs
}

const invalidOperatorDetail = "not a valid selector operator"

func nodeSelectorRequirement(req corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	valuesPath := fldPath.Child("values")
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(valuesPath, "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(valuesPath, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(valuesPath, "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		errs = append(errs, field.Invalid(fldPath.Child("operator"), req.Operator, invalidOperatorDetail))
	}
	errs = append(errs, labelName(req.Key, fldPath.Child("key"))...)
	for i, v := range req.Values {
		errs = append(errs, labelValue(v, valuesPath.Index(i))...)
	}
	return errs
}

func nodeFieldSelectorRequirement(req corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(fldPath.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	default:
		errs = append(errs, field.Invalid(fldPath.Child("operator"), req.Operator, invalidOperatorDetail))
	}
	if req.Key != metav1.ObjectNameField {
		return append(errs, field.Invalid(fldPath.Child("key"), req.Key, "not a valid field selector key"))
	}
	for i, v := range req.Values {
		errs = append(errs, nodeName(v, fldPath.Child("values").Index(i))...)
	}
	return errs
}

// objectMeta validates metadata like kube-apiserver does on create. A
// manifest may carry only generateName (the server would generate the name),
// so the missing name is not an error then; generateName itself is checked.
func objectMeta(meta *metav1.ObjectMeta, namespaced bool, fldPath *field.Path) field.ErrorList {
	m := *meta
	// Manifests for namespaced objects commonly leave the namespace to the
	// client (kubectl -n, or "default"); only a namespace that is set must
	// be valid.
	if namespaced && m.Namespace == "" {
		m.Namespace = metav1.NamespaceDefault
	}
	errs := apivalidation.ValidateObjectMeta(&m, namespaced, apivalidation.NameIsDNSSubdomain, fldPath)
	if m.Name == "" && m.GenerateName != "" {
		namePath := fldPath.Child("name").String()
		errs = slices.DeleteFunc(errs, func(e *field.Error) bool {
			return e.Type == field.ErrorTypeRequired && e.Field == namePath
		})
	}
	return errs
}
