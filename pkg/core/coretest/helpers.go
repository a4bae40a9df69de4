package coretest

import (
	"syscall"
	"testing"
	"time"
)

// Must fails the test at once on a non-nil error: for set-up steps whose
// failure makes the rest of the test meaningless.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// CPUTime is the user and system CPU time of the process so far. On a
// shared machine it says more about the work a benchmark did than the
// wall time does.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
