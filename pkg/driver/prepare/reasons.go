package prepare

import "errors"

// Why a prepare or unprepare failed (ReasonOf): the reason label of the
// driver's dractl_driver_operation_errors_total.
const (
	// ReasonConflict: another claim holds the device or the counters it
	// needs, or the driver does not publish it (PrepareConflictError).
	ReasonConflict = "conflict"
	// ReasonNotAllocated: the claim has no allocation.
	ReasonNotAllocated = "not_allocated"
	// ReasonConfig: an opaque configuration the Profile refused.
	ReasonConfig = "config"
	// ReasonPartition: the Profile failed to create, list or destroy a
	// partition.
	ReasonPartition = "partition"
	// ReasonCDI: a CDI spec could not be written or removed.
	ReasonCDI = "cdi"
	// ReasonCheckpoint: a checkpoint could not be read, written or
	// removed.
	ReasonCheckpoint = "checkpoint"
	// ReasonOther: anything else.
	ReasonOther = "other"
)

// Reasons are the values ReasonOf returns for an error, in the order of
// their constants.
func Reasons() []string {
	return []string{ReasonConflict, ReasonNotAllocated, ReasonConfig, ReasonPartition, ReasonCDI, ReasonCheckpoint, ReasonOther}
}

// reasonError is an error of one step of prepare or unprepare.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

func because(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &reasonError{reason: reason, err: err}
}

// ReasonOf says why a Prepare or Unprepare of the kit failed (one of the
// Reason constants); "" for no error.
func ReasonOf(err error) string {
	if err == nil {
		return ""
	}
	var conflict *PrepareConflictError
	if errors.As(err, &conflict) {
		return ReasonConflict
	}
	var r *reasonError
	if errors.As(err, &r) {
		return r.reason
	}
	var corrupt *CorruptCheckpointError
	if errors.As(err, &corrupt) {
		return ReasonCheckpoint
	}
	return ReasonOther
}
