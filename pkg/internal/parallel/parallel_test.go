package parallel

import (
	"sync/atomic"
	"testing"
)

func TestForCallsEachIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 100} {
		calls := make([]atomic.Int32, n)
		For(n, func(i int) { calls[i].Add(1) })
		for i := range calls {
			if c := calls[i].Load(); c != 1 {
				t.Errorf("n=%d: index %d called %d times", n, i, c)
			}
		}
	}
}
