package app

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"

	"k8s.io/component-base/cli"
)

// ProfileEnv names the environment variable that turns on CPU profiling
// of the whole process, for benchmarks that split a run into phases: the
// profile goes to $DRACTL_SCHEDULER_CPUPROFILE.0, and every SIGUSR1 ends
// the current file and starts the next (.1, .2, …). kube-scheduler's own
// /debug/pprof endpoint profiles a fixed number of seconds, which cannot
// follow phases whose length is unknown in advance.
const ProfileEnv = "DRACTL_SCHEDULER_CPUPROFILE"

// StartProfiling starts the profile ProfileEnv asks for, if any, and
// returns the function that ends it.
func StartProfiling() (stop func(), err error) {
	prefix := os.Getenv(ProfileEnv)
	if prefix == "" {
		return func() {}, nil
	}
	p := &phaseProfile{prefix: prefix}
	if err := p.next(); err != nil {
		return nil, err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sig:
				if err := p.next(); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
		p.end()
	}, nil
}

type phaseProfile struct {
	mu     sync.Mutex
	prefix string
	n      int
	f      *os.File
}

func (p *phaseProfile) next() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
	f, err := os.Create(fmt.Sprintf("%s.%d", p.prefix, p.n))
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	p.n++
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("CPU profile: %w", err)
	}
	p.f = f
	return nil
}

func (p *phaseProfile) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
}

func (p *phaseProfile) endLocked() {
	if p.f == nil {
		return
	}
	pprof.StopCPUProfile()
	p.f.Close()
	p.f = nil
}

// Main runs dractl-scheduler, the profile ProfileEnv asks for around it,
// and returns its exit code: the whole program, which each minor's module
// wraps in its own main package.
func Main() int {
	stop, err := StartProfiling()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := cli.Run(NewCommand())
	stop()
	return code
}
