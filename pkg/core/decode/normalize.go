package decode

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/core/api"
)

// normalize makes a decoded object look as it would when read back from an
// API server. These are not API defaults (those are in defaults.go) but
// effects of how the server handles and serializes objects.
func normalize(o apiObject, k *kindInfo) {
	if k.namespaced {
		// The server takes the namespace from the request, which kubectl
		// fills with "default" when neither file nor context names one.
		if o.GetNamespace() == "" {
			o.SetNamespace(metav1.NamespaceDefault)
		}
	} else {
		// The server silently clears metadata.namespace of cluster-scoped
		// objects on create.
		o.SetNamespace("")
	}

	// The server gives every object a UID when it creates it. A Pod is
	// what other objects refer to by UID (the ownerReferences and
	// reservedFor of the claims made for it), so one read without a UID
	// gets one, derived from its namespace and name: the same file gives
	// the same UID, and what is made for the pod names it when read back.
	// Other kinds keep what they have: a made-up UID in an object written
	// back to a cluster would fail the server's UID precondition.
	if p, ok := o.(*corev1.Pod); ok && p.UID == "" {
		p.UID = PodUID(p.Namespace, p.Name)
	}

	// metav1.Time is written with second precision, so a client never sees
	// sub-second parts; keeping them would also make encode-then-decode
	// change the object.
	if t := o.GetCreationTimestamp(); !t.IsZero() {
		o.SetCreationTimestamp(truncate(t))
	}
	if t := o.GetDeletionTimestamp(); t != nil {
		tt := truncate(*t)
		o.SetDeletionTimestamp(&tt)
	}
	for i := range o.GetManagedFields() {
		mf := &o.GetManagedFields()[i]
		if mf.Time != nil {
			tt := truncate(*mf.Time)
			mf.Time = &tt
		}
		if mf.FieldsV1 != nil {
			mf.FieldsV1.SetRawBytes(canonicalJSON(mf.FieldsV1.GetRawBytes()))
		}
	}
	if s, ok := o.(*api.ResourceSlice); ok {
		for i := range s.Spec.Devices {
			for j := range s.Spec.Devices[i].Taints {
				if t := s.Spec.Devices[i].Taints[j].TimeAdded; t != nil {
					tt := truncate(*t)
					s.Spec.Devices[i].Taints[j].TimeAdded = &tt
				}
			}
		}
	}
}

func truncate(t metav1.Time) metav1.Time {
	return metav1.Time{Time: t.Time.Truncate(time.Second)}
}

// canonicalJSON rewrites raw JSON (fieldsV1 is kept verbatim by its
// decoder) compactly with sorted keys, so that the same content always has
// the same bytes whichever format it was read from.
func canonicalJSON(raw []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// podUIDSpace is the namespace of the name-based UUIDs PodUID makes.
var podUIDSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://dractl.dev/pod-uid"))

// PodUID is the UID a Pod read without one gets: a name-based UUID
// (RFC 9562 version 5) of "<namespace>/<name>", in the form of the random
// UUIDs kube-apiserver assigns, and always the same for the same pod.
func PodUID(namespace, name string) types.UID {
	return types.UID(uuid.NewSHA1(podUIDSpace, []byte(namespace+"/"+name)).String())
}
