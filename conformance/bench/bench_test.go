package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/dractl/dractl/conformance/scenario"
)

// BenchmarkCycle is one scheduling cycle (or one Filter) per op, per
// workload and side; cmd/benchtable runs the same ops in interleaved
// rounds and writes docs/performance.md.
func BenchmarkCycle(b *testing.B) {
	for _, r := range All() {
		for _, s := range Sides {
			b.Run(strings.ReplaceAll(r.Name, " ", "_")+"/"+strings.ReplaceAll(s.Name, " ", "_"), func(b *testing.B) {
				op, err := NewOp(r.Make(), s)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if out := op(ctx, i); out.Kind == scenario.Fatal || out.Kind == scenario.Timeout {
						b.Fatalf("%s: %v", out.Kind, out.Err)
					}
				}
			})
		}
	}
}

// TestWorkloadsAgree checks that every workload has the same outcome and
// devices on upstream and dractl, for both states of the churn claim.
func TestWorkloadsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	Timeout /= 5
	for _, r := range All() {
		w := r.Make()
		ops := make([]Op, len(Sides))
		for j, s := range Sides {
			op, err := NewOp(w, s)
			if err != nil {
				t.Fatalf("%s %s: %v", w.Name, s.Name, err)
			}
			ops[j] = op
		}
		for i := range 2 {
			var ref *string
			for j, s := range Sides {
				out := ops[j](context.Background(), i)
				if out.Kind == scenario.Timeout {
					continue
				}
				got := out.String()
				if ref == nil {
					ref = &got
				} else if got != *ref {
					t.Errorf("%s, op %d: %s says %s, want %s", w.Name, i, s.Name, got, *ref)
				}
			}
		}
	}
}

// TestChurnHoldsDevices checks that every workload's churn claim names
// devices its slices publish: a claim holding nothing would make the delta
// of each cycle cheaper than a scheduler's.
func TestChurnHoldsDevices(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	for _, r := range All() {
		w := r.Make()
		if w.Churn == nil {
			continue
		}
		devices := map[[3]string]bool{}
		for _, s := range w.Scenario.Slices {
			for _, d := range s.Spec.Devices {
				devices[[3]string{s.Spec.Driver, s.Spec.Pool.Name, d.Name}] = true
			}
		}
		for _, res := range w.Churn.Status.Allocation.Devices.Results {
			if !devices[[3]string{res.Driver, res.Pool, res.Device}] {
				t.Errorf("%s: churn claim holds %s/%s/%s, which no slice publishes", w.Name, res.Driver, res.Pool, res.Device)
			}
		}
	}
}
