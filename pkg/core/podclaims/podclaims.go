// Package podclaims resolves a pod's spec.resourceClaims to the
// ResourceClaims they stand for. It is the one resolver of dractl: the
// scheduler plugin, the offline verbs (allocate, explain, explain pod) and
// the simulator all go through it, so that a pod's claims are found, and a
// claim not created yet is named, the same way everywhere.
//
// The rules are Kubernetes' own:
//   - A named entry (resourceClaimName) is the claim of that name.
//   - A template entry (resourceClaimTemplateName) is the claim the
//     resourceclaim controller recorded in pod.status.resourceClaimStatuses
//     (k8s.io/dynamic-resource-allocation/resourceclaim.Name); a recorded
//     nil name means the controller decided no claim is needed, and the
//     entry is skipped. Such a claim must be controlled by the pod
//     (resourceclaim.IsForPod).
//   - Until the controller has recorded the name, kube-scheduler waits.
//     A Resolver with Templates set (the offline verbs, the simulator)
//     instead finds the claim the controller created for the entry but has
//     not recorded yet (controlled by the pod, annotated with the entry's
//     name, as the controller itself looks it up), or makes the claim the
//     controller would create (FromTemplate).
//   - A claim being deleted is not usable.
//   - With DeviceClasses to resolve extended resource names (Resolver.Classes),
//     a pod asking for an extended resource that a DeviceClass backs has one
//     more claim: the extended-resource claim kube-scheduler creates for it
//     (KEP-5004; see extended.go), whose requests depend on the node.
package podclaims

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
)

// Entry is one entry of pod.spec.resourceClaims and the claim it stands
// for.
type Entry struct {
	// Index is the entry's position in pod.spec.resourceClaims.
	Index int
	// Name is the entry's name, which is how users know the claim.
	Name string
	// Template names the ResourceClaimTemplate of a template entry; empty
	// for a named claim.
	Template string
	// Claim is the claim: as stored, or, when Generated, the one the
	// resourceclaim controller will create. nil when Err is set.
	Claim *resourcev1.ResourceClaim
	// Generated marks a claim made here from Template, not read.
	Generated bool
	// Err says why the entry has no usable claim: the claim does not
	// exist (IsNotFound), is being deleted, or was made for another pod.
	// It is worded as kube-scheduler words it, since pods' conditions
	// show it; Field says which field of the pod it concerns.
	Err error
	// Field is the path of the pod field that Err concerns.
	Field string
	// Extended is set for the extended-resource entry (Name is
	// ExtendedEntryName, Index -1): what the pod asks of extended
	// resources that DeviceClasses back. Its Claim is the claim an
	// earlier attempt created, if any; otherwise nil, and the claim is
	// made per node (Extended.OnNode, Extended.Claim).
	Extended *Extended
}

// IsNotFound reports whether err says that a claim, or the template it is
// to be made from, does not exist (yet).
func IsNotFound(err error) bool {
	return apierrors.IsNotFound(err) || errors.Is(err, resourceclaim.ErrClaimNotFound)
}

// Resolver finds claims. A lookup returns (nil, nil) or a NotFound API
// error for an object that does not exist; any other error is the
// lookup's own failure and becomes the entry's Err as it is.
type Resolver struct {
	// Claim looks up a stored ResourceClaim.
	Claim func(namespace, name string) (*resourcev1.ResourceClaim, error)
	// AcceptPodGroupOwner lets a template's claim be controlled by the
	// pod's PodGroup rather than the pod (KEP-5729, kube-scheduler's
	// DRAWorkloadResourceClaims).
	AcceptPodGroupOwner bool
	// Templates, when set, lets the resolver stand in for the resourceclaim
	// controller: a template entry whose claim is not recorded in the
	// pod's status (or recorded but not stored) gets the claim the
	// controller created or would create. Without it, such an entry is
	// not found, as kube-scheduler sees it.
	Templates *Templates
	// Classes, when set, resolves extended resource names to the
	// DeviceClasses that back them (KEP-5004): a pod that asks for such
	// a resource gets one more Entry, named ExtendedEntryName, after those
	// of spec.resourceClaims. Without it, extended resources are not
	// looked at.
	Classes ClassResolver
	// ExtendedClaim finds the extended-resource claim an earlier attempt
	// created for the pod, if the pod's status does not name it (the
	// attempt failed before writing the status). nil: it is searched
	// among Templates.Owned, if set.
	ExtendedClaim func(pod *corev1.Pod) *resourcev1.ResourceClaim
}

// Templates is what standing in for the resourceclaim controller needs.
type Templates struct {
	// Template looks up a ResourceClaimTemplate.
	Template func(namespace, name string) (*resourcev1.ResourceClaimTemplate, error)
	// Owned returns claims among which those the pod controls are found;
	// claims of other pods or namespaces are ignored. nil: no claims are
	// known beyond what Claim finds by name.
	Owned func(pod *corev1.Pod) []*resourcev1.ResourceClaim
}

// Resolve returns one Entry for each entry of pod.spec.resourceClaims that
// stands for a claim, in order, and the first entry's Err, if any, so that
// a caller that needs every claim (a scheduling cycle) can stop there
// while one that reports (explain pod) reads every Entry.
func (r Resolver) Resolve(pod *corev1.Pod) ([]Entry, error) {
	out := make([]Entry, 0, len(pod.Spec.ResourceClaims))
	var first error
	for i := range pod.Spec.ResourceClaims {
		e, skip := r.entry(pod, i)
		if skip {
			continue
		}
		if e.Err != nil && first == nil {
			first = e.Err
		}
		out = append(out, e)
	}
	if r.Classes != nil {
		if e, ok := r.extended(pod); ok {
			if e.Err != nil && first == nil {
				first = e.Err
			}
			out = append(out, e)
		}
	}
	return out, first
}

// extended is the pod's extended-resource entry, if it asks for an
// extended resource that a DeviceClass backs.
func (r Resolver) extended(pod *corev1.Pod) (Entry, bool) {
	e := Entry{Index: -1, Name: ExtendedEntryName, Field: "spec.containers[*].resources.requests"}
	ext, err := ExtendedOf(pod, r.Classes)
	switch {
	case err != nil:
		e.Err = err
		return e, true
	case ext == nil:
		return e, false
	}
	e.Extended = ext
	e.Claim = r.findExtendedClaim(pod)
	return e, true
}

// findExtendedClaim finds the claim an earlier attempt created for the
// pod: the one its status names, or one the pod controls that is
// annotated as its extended-resource claim.
func (r Resolver) findExtendedClaim(pod *corev1.Pod) *resourcev1.ResourceClaim {
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil && st.ResourceClaimName != "" {
		if c, err := r.Claim(pod.Namespace, st.ResourceClaimName); err == nil && c != nil && IsExtendedClaimOf(pod, c) {
			return c
		}
	}
	var candidates []*resourcev1.ResourceClaim
	switch {
	case r.ExtendedClaim != nil:
		if c := r.ExtendedClaim(pod); c != nil {
			candidates = append(candidates, c)
		}
	case r.Templates != nil && r.Templates.Owned != nil:
		candidates = r.Templates.Owned(pod)
	}
	for _, c := range candidates {
		if IsExtendedClaimOf(pod, c) {
			return c
		}
	}
	return nil
}

var (
	claimsResource    = resourcev1.Resource("resourceclaims")
	templatesResource = resourcev1.Resource("resourceclaimtemplates")
)

func (r Resolver) entry(pod *corev1.Pod, i int) (e Entry, skip bool) {
	ref := &pod.Spec.ResourceClaims[i]
	e = Entry{Index: i, Name: ref.Name, Template: ptr.Deref(ref.ResourceClaimTemplateName, ""), Field: fmt.Sprintf("spec.resourceClaims[%d]", i)}
	name, mustCheckOwner, err := resourceclaim.Name(pod, ref)
	switch {
	case errors.Is(err, resourceclaim.ErrClaimNotFound) && r.Templates != nil:
		return r.fromTemplate(pod, e, ""), false
	case err != nil:
		e.Err = err
		return e, false
	case name == nil:
		// The controller decided that the pod needs no claim here.
		return e, true
	}
	if mustCheckOwner {
		e.Field += ".resourceClaimTemplateName"
	} else {
		e.Field += ".resourceClaimName"
	}
	claim, err := r.Claim(pod.Namespace, *name)
	switch {
	case apierrors.IsNotFound(err) || err == nil && claim == nil:
		if mustCheckOwner && r.Templates != nil {
			// Recorded in the status but not stored: the input holds the
			// pod without its claim (a snapshot taken between the two
			// writes).
			return r.fromTemplate(pod, e, *name), false
		}
		if err == nil {
			err = apierrors.NewNotFound(claimsResource, *name)
		}
		e.Err = err
	case err != nil:
		e.Err = err
	default:
		e.Claim, e.Err = usable(pod, claim, mustCheckOwner, r.AcceptPodGroupOwner)
	}
	return e, false
}

// usable checks that a stored claim may be used by the pod, with the
// in-tree plugin's words.
func usable(pod *corev1.Pod, claim *resourcev1.ResourceClaim, mustCheckOwner, acceptPodGroupOwner bool) (*resourcev1.ResourceClaim, error) {
	if claim.DeletionTimestamp != nil {
		return nil, fmt.Errorf("resourceclaim %q is being deleted", claim.Name)
	}
	if mustCheckOwner {
		if err := resourceclaim.IsForPod(pod, claim, acceptPodGroupOwner); err != nil {
			return nil, err
		}
	}
	return claim, nil
}

// fromTemplate finds or makes the claim of a template entry the pod's
// status does not lead to; name is the name the status records, if any.
func (r Resolver) fromTemplate(pod *corev1.Pod, e Entry, name string) Entry {
	if r.Templates.Owned != nil && name == "" {
		for _, c := range r.Templates.Owned(pod) {
			if c.Namespace == pod.Namespace && c.Annotations[resourcev1.PodResourceClaimAnnotation] == e.Name && metav1.IsControlledBy(c, pod) {
				e.Claim, e.Err = usable(pod, c, true, false)
				return e
			}
		}
	}
	e.Field = fmt.Sprintf("spec.resourceClaims[%d].resourceClaimTemplateName", e.Index)
	t, err := r.Templates.Template(pod.Namespace, e.Template)
	switch {
	case apierrors.IsNotFound(err) || err == nil && t == nil:
		e.Err = apierrors.NewNotFound(templatesResource, e.Template)
		return e
	case err != nil:
		e.Err = err
		return e
	}
	e.Claim, e.Generated = FromTemplate(pod, e.Name, t), true
	if name != "" {
		e.Claim.Name, e.Claim.GenerateName = name, ""
	}
	return e
}

// FromTemplate makes the claim the resourceclaim controller creates for
// the pod's template entry named entry: the template's labels, annotations
// and spec, the pod as controlling owner, the annotation naming the entry,
// and a name generated from GenerateName. The API server would append five random characters; here they
// are derived from the pod and the entry, so that the same input always
// gives the same name.
func FromTemplate(pod *corev1.Pod, entry string, t *resourcev1.ResourceClaimTemplate) *resourcev1.ResourceClaim {
	annotations := maps.Clone(t.Spec.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[resourcev1.PodResourceClaimAnnotation] = entry
	base := GenerateName(pod.Name, entry)
	return &resourcev1.ResourceClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            base + nameSuffix(pod.Namespace+"/"+pod.Name+"/"+entry),
			GenerateName:    base,
			Namespace:       pod.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}},
			Annotations:     annotations,
			Labels:          maps.Clone(t.Spec.ObjectMeta.Labels),
		},
		Spec: *t.Spec.Spec.DeepCopy(),
	}
}

// GenerateName is the metadata.generateName the resourceclaim controller
// gives the claim of a pod's template entry: "<pod>-<entry>-". When that
// is longer than 57 characters, both parts are cut in proportion and
// joined by one hyphen with none after it, exactly as the controller does,
// so that with the API server's five random characters the name stays
// within 63.
func GenerateName(pod, entry string) string {
	const maxBaseLen = 57
	base := pod + "-" + entry + "-"
	if len(base) > maxBaseLen {
		base = pod[:len(pod)*maxBaseLen/len(base)] + "-" + entry[:len(entry)*maxBaseLen/len(base)]
	}
	return base
}

// nameSuffix is five characters of the alphabet the API server draws
// generated name suffixes from (k8s.io/apiserver's names.SimpleNameGenerator
// uses utilrand.String), taken from a hash of key.
func nameSuffix(key string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	h := fnv.New64a()
	h.Write([]byte(key))
	v := h.Sum64()
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[v%uint64(len(alphabet))]
		v /= uint64(len(alphabet))
	}
	return string(b)
}
