package driverkit

import (
	"errors"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestPublishFailure: the server's answers fall into the few reasons of
// dractl_driver_publish_failures_total.
func TestPublishFailure(t *testing.T) {
	gr := resourcev1.Resource("resourceslices")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apierrors.NewConflict(gr, "s", errors.New("changed")), PublishFailureConflict},
		{apierrors.NewAlreadyExists(gr, "s"), PublishFailureConflict},
		{apierrors.NewForbidden(gr, "s", errors.New("policy")), PublishFailureForbidden},
		{apierrors.NewInvalid(resourcev1.SchemeGroupVersion.WithKind("ResourceSlice").GroupKind(), "s", nil), PublishFailureInvalid},
		{apierrors.NewServiceUnavailable("etcd"), PublishFailureUnavailable},
		{apierrors.NewTooManyRequests("slow down", 1), PublishFailureUnavailable},
		{apierrors.NewInternalError(errors.New("boom")), PublishFailureUnavailable},
		{errors.New("connection refused"), PublishFailureOther},
	} {
		if got := publishFailure(tc.err); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
}
