// Package parallel spreads independent work over the machine's cores.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// For runs fn(0..n-1) on up to GOMAXPROCS goroutines and returns when all
// calls have returned. Work is handed out one index at a time, so uneven
// items balance; callers write results by index, which keeps output order
// independent of scheduling.
func For(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
