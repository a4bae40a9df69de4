package driverkit

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The reasons a driver gives outside its log: of its Events, and of its
// failed ResourceSlice writes. Why a prepare or unprepare failed is the
// prepare kit's to say (prepare.ReasonOf).

// EventReasonInvalidPool is the reason of the Warning event on the Node
// when the driver's pool description is refused.
const EventReasonInvalidPool = "InvalidResourcePool"

// Why a ResourceSlice write failed, the reason label of
// MetricPublishFailures: the server's answer (publishFailure), or a slice
// it stored without fields it does not serve (a feature gate off).
const (
	PublishFailureConflict      = "conflict"       // Conflict, AlreadyExists: another writer changed the slice
	PublishFailureForbidden     = "forbidden"      // Forbidden, Unauthorized: RBAC or the admission policy
	PublishFailureInvalid       = "invalid"        // Invalid, BadRequest, RequestEntityTooLarge
	PublishFailureUnavailable   = "unavailable"    // the server could not answer: unavailable, timeouts, throttling, internal errors
	PublishFailureDroppedFields = "dropped_fields" // stored without fields the server does not serve
	PublishFailureOther         = "other"
)

var publishFailures = []string{PublishFailureConflict, PublishFailureForbidden, PublishFailureInvalid, PublishFailureUnavailable, PublishFailureDroppedFields, PublishFailureOther}

// publishFailure is the reason label of a failed write.
func publishFailure(err error) string {
	switch apierrors.ReasonForError(err) {
	case metav1.StatusReasonConflict, metav1.StatusReasonAlreadyExists:
		return PublishFailureConflict
	case metav1.StatusReasonForbidden, metav1.StatusReasonUnauthorized:
		return PublishFailureForbidden
	case metav1.StatusReasonInvalid, metav1.StatusReasonBadRequest, metav1.StatusReasonRequestEntityTooLarge:
		return PublishFailureInvalid
	case metav1.StatusReasonServiceUnavailable, metav1.StatusReasonTimeout, metav1.StatusReasonServerTimeout,
		metav1.StatusReasonTooManyRequests, metav1.StatusReasonInternalError:
		return PublishFailureUnavailable
	}
	return PublishFailureOther
}
