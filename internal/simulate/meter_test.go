package simulate

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/render"
)

// TestMeterAgreesWithUsage checks the meter's sums, read from pool models
// and claims, against the same rule applied to state.PoolUsage (holders,
// blocked partitions, consumed counters) at many points of runs with
// departures.
func TestMeterAgreesWithUsage(t *testing.T) {
	c := dgxCluster(3)
	s := mustStream(t, migWorkload(11, 400, 5*time.Second, 10*time.Minute))
	for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
		for _, stop := range []int{1, 17, 60, 150, 333, 500} {
			res, err := Run(context.Background(), c, s, Options{Strategy: strategy, MaxEvents: stop, State: fixedShareIDs()})
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s after %d events", res.Strategy, res.Events)
			m := newMeter(res.EndView.w)
			for i, isl := range res.EndView.w.islands {
				var got, want islandSums
				m.sum(&got, m.models[i], res.EndView.snaps[i])
				sumUsage(m, &want, isl, res.EndView.snaps[i])
				for k, f := range m.families {
					if !near(got.capacity[k], want.capacity[k]) || !near(got.used[k], want.used[k]) || !near(got.stranded[k], want.stranded[k]) {
						t.Errorf("%s, island %d, %s: capacity/used/stranded %v/%v/%v, usage says %v/%v/%v", name, i, f.Name,
							got.capacity[k], got.used[k], got.stranded[k], want.capacity[k], want.used[k], want.stranded[k])
					}
				}
			}
			if stop >= 150 && res.End.Stranded[m.index["memory-slice"]] == 0 && res.End.Utilisation[m.index["memory-slice"]] == 0 {
				t.Errorf("%s: nothing used or stranded; the check is not exercised", name)
			}
		}
	}
}

func near(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(y)) }

// sumUsage is meter.sum's rule over state.PoolUsage: a counter's free
// amount is stranded when no device of its set that nobody holds and that
// is not blocked consumes it.
func sumUsage(m *meter, s *islandSums, isl *island, snap *state.Snapshot) {
	n := len(m.families)
	s.capacity, s.used, s.stranded = make([]float64, n), make([]float64, n), make([]float64, n)
	for _, id := range isl.pools {
		u := snap.Usage(id)
		if u == nil {
			continue
		}
		usable := map[string]map[string]bool{}
		for i := range u.Devices {
			d := &u.Devices[i]
			if d.ViewErr != nil || len(d.Holders) > 0 || d.Blocked {
				continue
			}
			for _, cv := range d.View.Consumptions {
				set := usable[cv.CounterSet()]
				if set == nil {
					set = map[string]bool{}
					usable[cv.CounterSet()] = set
				}
				for name, c := range cv.Counters() {
					if c.Value.Sign() > 0 {
						set[name] = true
					}
				}
			}
		}
		for _, cs := range u.CounterSets {
			for _, c := range cs.Counters {
				k, ok := m.index[render.CounterFamily(c.Name)]
				if !ok {
					continue
				}
				capacity, consumed := c.Capacity.AsApproximateFloat64(), c.Consumed.AsApproximateFloat64()
				s.capacity[k] += capacity
				s.used[k] += consumed
				if free := capacity - consumed; free > 0 && !usable[cs.Name][c.Name] {
					s.stranded[k] += free
				}
			}
		}
	}
}
