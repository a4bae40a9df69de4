package simulate

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/coretest"
)

// BenchmarkSimulate1000DGX runs 100,000 claim events (arrivals and
// departures) of the MIG mix on 1,000 DGX H100 nodes (8,000 GPUs,
// 152,000 devices) per strategy. Pods arrive every 10ms on average and
// run 10 minutes on average: the cluster fills, then runs near full, so
// that most arrivals search many nodes, and pods wait in the scheduling
// queue, every one of them tried again at every departure. Reported: ns
// per run (wall), the CPU seconds of the run, the live heap at the end
// (MB), pods placed, placed after waiting, and still waiting.
func BenchmarkSimulate1000DGX(b *testing.B) {
	c := dgxCluster(1000)
	s := mustStream(b, migWorkload(1, 90_000, 10*time.Millisecond, 10*time.Minute))
	for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
		b.Run(strategyName(strategy), func(b *testing.B) {
			for b.Loop() {
				cpu0 := coretest.CPUTime()
				res, err := Run(context.Background(), c, s, Options{Strategy: strategy, MaxEvents: 100_000})
				if err != nil {
					b.Fatal(err)
				}
				if res.Events != 100_000 {
					b.Fatalf("%d events, want 100000", res.Events)
				}
				b.ReportMetric(float64(coretest.CPUTime()-cpu0)/1e9, "cpu-s")
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.HeapAlloc)/1e6, "live-MB")
				b.ReportMetric(float64(res.Placed), "placed")
				b.ReportMetric(float64(res.Waiting), "waiting")
				b.ReportMetric(float64(res.Wait.Waited), "placed-after-wait")
				runtime.KeepAlive(res)
			}
		})
	}
}

// BenchmarkPacking500DGX is the packing claim at cluster scale: the MIG
// mix, nobody leaving, on 500 DGX H100 nodes (4,000 GPUs) until the
// stream ends, per strategy. Reported: pods placed before the first
// failure and in all, and the stranded share of memory slices and of
// multiprocessors at the end.
func BenchmarkPacking500DGX(b *testing.B) {
	c := dgxCluster(500)
	s := mustStream(b, migWorkload(2, 30_000, time.Second, 0))
	for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
		b.Run(strategyName(strategy), func(b *testing.B) {
			for b.Loop() {
				res, err := Run(context.Background(), c, s, Options{Strategy: strategy, Samples: 20})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.PlacedBeforeFirstFailure), "placed-before-failure")
				b.ReportMetric(float64(res.Placed), "placed")
				for i, f := range res.Counters {
					switch f.Name {
					case "memory-slice", "multiprocessors":
						b.ReportMetric(100*res.End.Stranded[i], f.Name+"-stranded-%")
						b.ReportMetric(100*res.End.Utilisation[i], f.Name+"-used-%")
					}
				}
			}
		})
	}
}

// BenchmarkNodesNeeded24Streams is a nodes-needed search on the packing
// experiment's 24 seeded MIG streams (internal/testing/packing), here as
// 24 tenants' Workloads of 60 pods each arriving together (a pod about
// every 20s per tenant, living 30 minutes on average): how many DGX H100
// nodes keep the p99 wait within 5 minutes, per strategy. Reported: the
// CPU seconds of the search, the nodes needed and the runs it took.
func BenchmarkNodesNeeded24Streams(b *testing.B) {
	set := migWorkload(0, 60, 20*time.Second, 30*time.Minute)
	base := set.Workloads[0]
	set.Workloads = nil
	for seed := range int64(24) {
		w := *base
		w.Name = fmt.Sprintf("tenant-%02d", seed)
		w.Spec.Seed = seed
		set.Workloads = append(set.Workloads, &w)
	}
	s := mustStream(b, set)
	c := dgxCluster(1)
	tmpl, err := NewTemplate(c.Nodes[0], c.Slices)
	if err != nil {
		b.Fatal(err)
	}
	for _, strategy := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
		b.Run(strategyName(strategy), func(b *testing.B) {
			for b.Loop() {
				cpu0 := coretest.CPUTime()
				plan, err := NodesNeeded(context.Background(), &Cluster{Classes: c.Classes}, tmpl, s, PlanOptions{MaxWait: 5 * time.Minute, Run: Options{Strategy: strategy, Samples: 20}})
				if err != nil {
					b.Fatal(err)
				}
				if !plan.Found {
					b.Fatalf("no answer within %d nodes", plan.Nodes)
				}
				b.ReportMetric(float64(coretest.CPUTime()-cpu0)/1e9, "cpu-s")
				b.ReportMetric(float64(plan.Nodes), "nodes")
				b.ReportMetric(float64(len(plan.Curve)), "runs")
			}
		})
	}
}
