package schedperf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkSchedulerPerf/dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes/in-tree/0/SchedulingWithResourceClaimTemplate/5000pods_500nodes-2         	       1	         0 ns/op	        40.50 SchedulingThroughput/Average	        38.00 SchedulingThroughput/Perc50	        12.00 SchedulingThroughput/Perc99	  3.1 scheduler_framework_extension_point_duration_ms/Perc50	 612.0 heap_memory_usage/Max
schedperf-latency BenchmarkSchedulerPerf/dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes/in-tree/0 attempt-p50-ms=41.5 prebind-p50-ms=20.25 points-p50-ms=Bind:3.1,PreBind:20.25
some log line
schedperf-latency BenchmarkSchedulerPerf/dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes/floor/0 attempt-p50-ms=9 prebind-p50-ms=-
BenchmarkSchedulerPerf/dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes/dractl/0/SchedulingWithResourceClaimTemplate/5000pods_500nodes-2 	1	0 ns/op	90.00 SchedulingThroughput/Average	88.00 SchedulingThroughput/Perc50	40.00 SchedulingThroughput/Perc99
BenchmarkSchedulerPerf/dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes/dractl/1/SchedulingWithResourceClaimTemplate/5000pods_500nodes-2 	1	0 ns/op	70.00 SchedulingThroughput/Average	66.00 SchedulingThroughput/Perc50	30.00 SchedulingThroughput/Perc99
BenchmarkSchedulerPerf/dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes/dractl/2/SchedulingWithResourceClaimTemplate/5000pods_500nodes-2 	1	0 ns/op	80.00 SchedulingThroughput/Average	77.00 SchedulingThroughput/Perc50	35.00 SchedulingThroughput/Perc99
BenchmarkSchedulerPerf/partitionabledevices/Partitionable/full_500nodes/floor/0/Partitionable/full_500nodes-2 	1	0 ns/op	100.00 SchedulingThroughput/Average	100.00 SchedulingThroughput/Perc50	90.00 SchedulingThroughput/Perc99
--- FAIL: BenchmarkSchedulerPerf/partitionabledevices/Partitionable/full_500nodes/dractl/0
`
	rows := parseBench(strings.NewReader(out), map[string]float64{"dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes": 56})
	if len(rows) != 2 {
		t.Fatalf("rows %+v, want 2", rows)
	}
	r := rows[0]
	if r.Name() != "dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes" || r.Threshold != 56 {
		t.Errorf("row %s threshold %v", r.Name(), r.Threshold)
	}
	if got := r.Runs[InTree]; len(got) != 1 || got[0] != (Throughput{Average: 40.5, Perc50: 38, Perc99: 12, PeakHeapMB: 612, AttemptMs: 41.5, PreBindMs: 20.25}) {
		t.Errorf("in-tree runs %+v", got)
	}
	if got := r.Median(Dractl); got != (Throughput{Average: 80, Perc50: 77, Perc99: 35}) {
		t.Errorf("dractl median %+v, want the 80 pods/s run", got)
	}
	if got := rows[1].Runs[Floor]; len(got) != 1 || rows[1].Runs[Dractl] != nil {
		t.Errorf("partitionable runs %+v", rows[1].Runs)
	}
	table := Table(rows)
	for _, want := range []string{
		"| dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes | 56 | 40.5 (38.0 / 12.0) | 80.0 (77.0 / 35.0) | did not end | 1.98× | — | 612 / — / — | 41.5 (20.2) / — / — |",
		"| partitionabledevices/Partitionable/full_500nodes | — | did not end | did not end | 100.0 | — | — | — / — / — | — / — / — |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks\n%s\n%s", want, table)
		}
	}
}

func TestThresholds(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, data string) {
		p := filepath.Join(dir, rel, "performance-config.yaml")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".", "- name: A\n  workloads:\n  - name: w1\n    threshold: 56\n  - name: w2\n")
	write("extendedresource/scoring", "- name: B\n  workloads:\n  - name: w\n    threshold:\n      ci: 120\n      local: 130\n")
	got, err := thresholds(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"dra/A/w1": 56, "dra/A/w2": 0, "extendedresource-scoring/B/w": 130}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

func TestSplice(t *testing.T) {
	const header = "| workload | x |\n| --- | --- |\n"
	doc := "# Perf\n\nintro\n"
	once := Splice(doc, header+"| a | 1 |\n| b | 2 |\n")
	if !strings.HasPrefix(once, doc) || !strings.Contains(once, BeginMarker+"\n"+header+"| a | 1 |\n| b | 2 |\n"+EndMarker) {
		t.Fatalf("first splice:\n%s", once)
	}
	// A run of a and c only: a replaced in place, b kept, c added.
	twice := Splice(once+"after\n", "| workload | y |\n| --- | --- |\n| c | 4 |\n| a | 3 |\n")
	if want := BeginMarker + "\n| workload | y |\n| --- | --- |\n| a | 3 |\n| b | 2 |\n| c | 4 |\n" + EndMarker + "\nafter\n"; !strings.HasSuffix(twice, want) {
		t.Fatalf("second splice:\n%s\nwant it to end with\n%s", twice, want)
	}
	// A row of a table with fewer columns gets empty ones.
	wider := Splice(once, "| workload | x | y |\n| --- | --- | --- |\n| b | 5 | 6 |\n")
	if want := "| workload | x | y |\n| --- | --- | --- |\n| a | 1 | — |\n| b | 5 | 6 |\n"; !strings.Contains(wider, want) {
		t.Errorf("splice of a wider table:\n%s\nwant\n%s", wider, want)
	}
	if got := Splice("", header+"| c | 1 |\n"); got != BeginMarker+"\n"+header+"| c | 1 |\n"+EndMarker+"\n" {
		t.Errorf("splice into an empty file: %q", got)
	}
	// Another minor's table has markers of its own: the first one's stays.
	m138, _ := MinorNamed("1.38")
	both := SpliceAt(once, header+"| a | 9 |\n", m138)
	begin, end := Markers(m138)
	if begin == BeginMarker || !strings.Contains(both, BeginMarker+"\n"+header+"| a | 1 |\n") ||
		!strings.HasSuffix(both, begin+"\n"+header+"| a | 9 |\n"+end+"\n") {
		t.Errorf("splice of 1.38's table beside 1.37's:\n%s", both)
	}
}
