package prepare

import (
	"fmt"
	"os"
	"slices"
	"syscall"
)

// KillAt returns a Config.Failpoint hook that kills the process with
// SIGKILL — no deferred function, no flush — the first time the named
// step is reached: what a crash, an OOM kill or a node power cut does.
// An empty name returns nil (no failpoint).
func KillAt(name string) (func(Failpoint), error) {
	if name == "" {
		return nil, nil
	}
	if !slices.Contains(PrepareFailpoints, Failpoint(name)) && !slices.Contains(UnprepareFailpoints, Failpoint(name)) {
		return nil, fmt.Errorf("unknown failpoint %q; known: %v %v", name, PrepareFailpoints, UnprepareFailpoints)
	}
	return func(f Failpoint) {
		if f == Failpoint(name) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; do not take another step
		}
	}, nil
}
