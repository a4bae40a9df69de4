package simulate

import (
	"math"
	"slices"
	"time"
)

// Wait is how long pods waited to be placed; Never: a pod that was never
// placed (it still waited at the end, or the allocator failed on it) lies
// at this point of the distribution.
type Wait struct {
	Seconds float64 `json:"seconds"`
	Never   bool    `json:"never,omitempty"`
}

// Duration is the wait, or -1 for Never.
func (w Wait) Duration() time.Duration {
	if w.Never {
		return -1
	}
	return time.Duration(w.Seconds * float64(time.Second))
}

// WaitStats is the distribution of waits of every pod that arrived: its
// wait when placed, unbounded when never placed.
type WaitStats struct {
	// Waited counts the pods placed after waiting.
	Waited int  `json:"waited"`
	P50    Wait `json:"p50"`
	P95    Wait `json:"p95"`
	P99    Wait `json:"p99"`
	Max    Wait `json:"max"`
	// Histogram counts pods by wait, buckets as in WaitBuckets, then the
	// pods never placed.
	Histogram []int `json:"histogram"`
}

// WaitBuckets are the upper bounds of the wait histogram's buckets, the
// first one holding the pods placed on arrival; a last bucket counts the
// pods never placed.
var WaitBuckets = []time.Duration{0, time.Second, 10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, math.MaxInt64}

// WaitBucketLabels name the histogram's buckets, the never-placed one last.
var WaitBucketLabels = []string{"0", "≤1s", "≤10s", "≤1m", "≤5m", "≤15m", "≤1h", ">1h", "never"}

// waitStats measures the waits of the first arrived pods of s; at is
// when each pod was placed, -1 if it was not.
func waitStats(s *Stream, at []time.Duration, arrived int) WaitStats {
	st := WaitStats{Histogram: make([]int, len(WaitBuckets)+1)}
	waits := make([]time.Duration, 0, arrived)
	never := 0
	for i := range arrived {
		if at[i] < 0 {
			never++
			continue
		}
		w := at[i] - s.Pods[i].Arrive
		if w > 0 {
			st.Waited++
		}
		waits = append(waits, w)
		b, _ := slices.BinarySearch(WaitBuckets, w)
		st.Histogram[b]++
	}
	st.Histogram[len(WaitBuckets)] = never
	slices.Sort(waits)
	st.P50, st.P95, st.P99, st.Max = quantile(waits, never, 0.50), quantile(waits, never, 0.95), quantile(waits, never, 0.99), quantile(waits, never, 1)
	return st
}

// quantile is the nearest-rank f-quantile of the sorted waits and never
// pods never placed: the smallest wait that at least f of the pods do not
// exceed.
func quantile(sorted []time.Duration, never int, f float64) Wait {
	n := len(sorted) + never
	if n == 0 {
		return Wait{}
	}
	k := int(math.Ceil(f*float64(n))) - 1
	if k >= len(sorted) {
		return Wait{Never: true}
	}
	return Wait{Seconds: sorted[max(k, 0)].Seconds()}
}
