package cli

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Profiling is for measuring dractl as a user runs it, in its own process
// against a real cluster: DRACTL_CPUPROFILE names a file for a CPU profile
// of the whole command, DRACTL_MEMPROFILE one for an allocation profile
// written when it ends, and DRACTL_MEMSTATS one for the totals a
// benchmark reads ("mallocs N" and "bytes N" lines: what the command
// allocated). None is a flag: they are for developers, and a verb's help
// should not carry them.
const (
	cpuProfileEnv = "DRACTL_CPUPROFILE"
	memProfileEnv = "DRACTL_MEMPROFILE"
	memStatsEnv   = "DRACTL_MEMSTATS"
)

// startProfiling starts what the environment asks for and returns the
// function that writes the profiles out.
func startProfiling() (stop func(), err error) {
	var stops []func() error
	if path := os.Getenv(cpuProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
		stops = append(stops, func() error { pprof.StopCPUProfile(); return f.Close() })
	}
	if path := os.Getenv(memProfileEnv); path != "" {
		// Finer sampling than the default, for the totals of a short
		// command.
		runtime.MemProfileRate = 4096
		stops = append(stops, func() error {
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		})
	}
	if path := os.Getenv(memStatsEnv); path != "" {
		stops = append(stops, func() error {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return os.WriteFile(path, fmt.Appendf(nil, "mallocs %d\nbytes %d\n", m.Mallocs, m.TotalAlloc), 0o644)
		})
	}
	return func() {
		for _, s := range stops {
			if err := s(); err != nil {
				fmt.Fprintf(os.Stderr, "writing a profile: %v\n", err)
			}
		}
	}, nil
}
