package decode

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/dractl/dractl/pkg/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
