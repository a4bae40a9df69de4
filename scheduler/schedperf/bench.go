package schedperf

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// The sides of a benchmark (testdata/bench_test.go): the in-tree plugin,
// dractl's in its place, and the floor, the workload with pods that have
// no claims or extended resources under the in-tree configuration.
const Floor = "floor"

// BenchOptions configure Bench.
type BenchOptions struct {
	Options
	// Workloads selects performance workloads by a regular expression over
	// <suite>/<test case>/<workload>; empty is all of them.
	Workloads string
	// Rounds each run every selected workload with each side in turn.
	Rounds int
}

// Throughput is scheduler_perf's SchedulingThroughput of one run, in pods
// per second.
type Throughput struct {
	Average, Perc50, Perc99 float64
	// PeakHeapMB is scheduler_perf's heap_memory_usage Max: the largest
	// HeapInuse of the benchmark's process sampled during the workload,
	// in MiB. kube-apiserver, the scheduler and the workload's informers
	// share that process (etcd runs apart), so only the difference
	// between sides is the plugin's.
	PeakHeapMB float64
	// AttemptMs is the p50 of a pod's scheduling attempt that ended bound
	// (scheduling and binding cycle) and PreBindMs that of PreBind alone,
	// in ms (0: not reported).
	AttemptMs, PreBindMs float64
}

// BenchRow is one workload's figures.
type BenchRow struct {
	Suite, TestCase, Workload string
	// Threshold is upstream's minimum average throughput for the workload
	// (0: none).
	Threshold float64
	// Runs are each side's throughputs, one per round that ended.
	Runs map[string][]Throughput
}

// Name is <suite>/<test case>/<workload>.
func (r BenchRow) Name() string { return r.Suite + "/" + r.TestCase + "/" + r.Workload }

// Median is a side's median run by average throughput (zero when it has
// none).
func (r BenchRow) Median(side string) Throughput {
	runs := slices.Clone(r.Runs[side])
	if len(runs) == 0 {
		return Throughput{}
	}
	slices.SortFunc(runs, func(a, b Throughput) int {
		switch {
		case a.Average < b.Average:
			return -1
		case a.Average > b.Average:
			return 1
		}
		return 0
	})
	return runs[len(runs)/2]
}

// Bench runs scheduler_perf's performance workloads of the DRA suites
// with each side and returns their throughput, in the order the
// workloads ran. Upstream's thresholds are read, not applied.
func Bench(opts BenchOptions) ([]BenchRow, error) {
	env, err := setUp(&opts.Options)
	if err != nil {
		return nil, err
	}
	defer env.cleanup()
	limits, err := thresholds(filepath.Join(env.mod, perfDir, "dra"))
	if err != nil {
		return nil, err
	}
	timeout := opts.WorkloadTimeout
	if timeout == 0 {
		timeout = 30 * time.Minute
	}
	args := []string{"go", "test", "-count=1", "-vet=off", "-timeout=24h", "-tags=" + opts.Minor.Tags, "-run", "^$", "-bench", "^BenchmarkSchedulerPerf$", "-benchtime=1x", "./" + adapterDir,
		"-args", "-workload-timeout=" + timeout.String(), fmt.Sprintf("-bench-rounds=%d", max(opts.Rounds, 1))}
	if opts.Workloads != "" {
		args = append(args, "-bench-workloads="+opts.Workloads)
	}
	args = append(args, opts.TestArgs...)
	pr, pw := io.Pipe()
	done := make(chan []BenchRow, 1)
	go func() {
		rows := parseBench(io.TeeReader(pr, opts.Log), limits)
		_, _ = io.Copy(io.Discard, pr)
		done <- rows
	}()
	testErr := run(env.mod, opts.Log, pw, env.vars, args...)
	pw.Close()
	rows := <-done
	if len(rows) == 0 {
		return nil, fmt.Errorf("no workload reported: %v", testErr)
	}
	return rows, testErr
}

// BenchFromLog reads the rows of an earlier Bench of opts.Minor from its
// go test output (what Bench writes to Options.Log), beside upstream's
// thresholds from the module cache, so that a table can be made again
// from a saved run.
func BenchFromLog(opts Options, log io.Reader) ([]BenchRow, error) {
	if opts.Minor.Name == "" {
		opts.Minor = Minors[0]
	}
	src, err := moduleDir(filepath.Join(opts.Repo, opts.Minor.Dir), opts.Minor.Module, opts.goEnv(), io.Discard)
	if err != nil {
		return nil, err
	}
	limits, err := thresholds(filepath.Join(src, upstream, "dra"))
	if err != nil {
		return nil, err
	}
	rows := parseBench(log, limits)
	if len(rows) == 0 {
		return nil, fmt.Errorf("no benchmark result in the log")
	}
	return rows, nil
}

// runName is a run's benchmark name as the adapter gives it
// (testdata/bench_test.go): suite, test case, workload, side, round.
const runName = `BenchmarkSchedulerPerf/([^/]+)/([^/]+)/([^/]+)/([^/]+)/(\d+)`

// benchLine is a benchmark result of a workload: its run's name, what
// scheduler_perf names below it, and the metrics.
var benchLine = regexp.MustCompile(`^` + runName + `/\S*\s+\d+\s+(.*)$`)

// parseBench reads go test's benchmark output.
func parseBench(r io.Reader, limits map[string]float64) []BenchRow {
	var rows []BenchRow
	at := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			latency(sc.Text(), rows, at)
			continue
		}
		row := BenchRow{Suite: m[1], TestCase: m[2], Workload: m[3]}
		i, ok := at[row.Name()]
		if !ok {
			row.Threshold = limits[row.Name()]
			row.Runs = map[string][]Throughput{}
			rows = append(rows, row)
			i = len(rows) - 1
			at[row.Name()] = i
		}
		var t Throughput
		f := strings.Fields(m[6])
		for j := 0; j+1 < len(f); j += 2 {
			v, err := strconv.ParseFloat(f[j], 64)
			if err != nil {
				continue
			}
			switch f[j+1] {
			case "SchedulingThroughput/Average":
				t.Average = v
			case "SchedulingThroughput/Perc50":
				t.Perc50 = v
			case "SchedulingThroughput/Perc99":
				t.Perc99 = v
			case "heap_memory_usage/Max":
				t.PeakHeapMB = v
			}
		}
		rows[i].Runs[m[4]] = append(rows[i].Runs[m[4]], t)
	}
	return rows
}

// latencyLine is what the adapter prints after each run (reportLatency in
// testdata/bench_test.go).
var latencyLine = regexp.MustCompile(`^schedperf-latency ` + runName + ` attempt-p50-ms=(\S+) prebind-p50-ms=(\S+)( .*)?$`)

// latency sets the latencies of line on the run it follows: the side's
// latest run of the workload.
func latency(line string, rows []BenchRow, at map[string]int) {
	m := latencyLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	i, ok := at[m[1]+"/"+m[2]+"/"+m[3]]
	if !ok {
		return
	}
	runs := rows[i].Runs[m[4]]
	if len(runs) == 0 {
		return
	}
	last := &runs[len(runs)-1]
	last.AttemptMs, _ = strconv.ParseFloat(m[6], 64)
	last.PreBindMs, _ = strconv.ParseFloat(m[7], 64)
}

// thresholds reads upstream's threshold of every workload below dra, by
// <suite>/<test case>/<workload>. A threshold given per topic counts by
// its largest value.
func thresholds(dra string) (map[string]float64, error) {
	out := map[string]float64{}
	err := eachConfig(dra, func(suite string, data []byte) error {
		var cases []struct {
			Name      string
			Workloads []struct {
				Name      string
				Threshold any
			}
		}
		if err := yaml.Unmarshal(data, &cases); err != nil {
			return err
		}
		for _, tc := range cases {
			for _, w := range tc.Workloads {
				out[suite+"/"+tc.Name+"/"+w.Name] = thresholdValue(w.Threshold)
			}
		}
		return nil
	})
	return out, err
}

func thresholdValue(v any) float64 {
	switch v := v.(type) {
	case float64:
		return v
	case map[string]any:
		best := 0.0
		for _, x := range v {
			best = max(best, thresholdValue(x))
		}
		return best
	}
	return 0
}

// Table renders the rows as markdown: each side's median average
// throughput (p50/p99 of that run), dractl's against the in-tree plugin's
// and the floor's, upstream's threshold, and the process's peak heap in
// each side's median run.
func Table(rows []BenchRow) string {
	var b strings.Builder
	b.WriteString("| workload | upstream threshold | in-tree avg (p50 / p99) | dractl avg (p50 / p99) | floor avg | dractl ÷ in-tree | dractl ÷ floor | peak heap, MiB: in-tree / dractl / floor | pod's attempt p50 (PreBind p50), ms: in-tree / dractl / floor |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		in, dr, fl := r.Median(InTree), r.Median(Dractl), r.Median(Floor)
		limit := "—"
		if r.Threshold > 0 {
			limit = fmt.Sprintf("%.0f", r.Threshold)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s |\n", r.Name(), limit, cell(in, r.Runs[InTree]), cell(dr, r.Runs[Dractl]),
			avg(fl, r.Runs[Floor]), ratio(dr.Average, in.Average, "×"), ratio(dr.Average, fl.Average, "%"),
			heap(in), heap(dr), heap(fl), attempt(in), attempt(dr), attempt(fl))
	}
	return b.String()
}

func cell(t Throughput, runs []Throughput) string {
	if len(runs) == 0 {
		return "did not end"
	}
	return fmt.Sprintf("%.1f (%.1f / %.1f)", t.Average, t.Perc50, t.Perc99)
}

func avg(t Throughput, runs []Throughput) string {
	if len(runs) == 0 {
		return "did not end"
	}
	return fmt.Sprintf("%.1f", t.Average)
}

func heap(t Throughput) string {
	if t.PeakHeapMB == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", t.PeakHeapMB)
}

func attempt(t Throughput) string {
	if t.AttemptMs == 0 {
		return "—"
	}
	if t.PreBindMs == 0 {
		return fmt.Sprintf("%.1f (—)", t.AttemptMs)
	}
	return fmt.Sprintf("%.1f (%.1f)", t.AttemptMs, t.PreBindMs)
}

func ratio(a, b float64, unit string) string {
	if a == 0 || b == 0 {
		return "—"
	}
	if unit == "%" {
		return fmt.Sprintf("%.0f %%", 100*a/b)
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// Markers delimit the table Bench writes into a document; the rest of the
// document is kept.
const (
	BeginMarker = "<!-- schedperf benchmark: generated by make bench-schedperf -->"
	EndMarker   = "<!-- end of schedperf benchmark -->"
)

// Markers are the markers of a minor's table: BeginMarker and EndMarker
// for the first of Minors, each other minor's name in its own.
func Markers(m Minor) (begin, end string) {
	if m.Name == "" || m.Name == Minors[0].Name {
		return BeginMarker, EndMarker
	}
	return "<!-- schedperf benchmark at Kubernetes " + m.Name + ": generated by make bench-schedperf -->",
		"<!-- end of schedperf benchmark at Kubernetes " + m.Name + " -->"
}

// Splice is SpliceAt for the first of Minors.
func Splice(doc, table string) string { return SpliceAt(doc, table, Minors[0]) }

// SpliceAt returns doc with table between the minor's markers (appended
// if doc has none). A run may cover some workloads only: the rows already
// there for workloads the new table lacks are kept in their place, the
// others replaced, new ones added at the end, under the new table's
// header.
func SpliceAt(doc, table string, m Minor) string {
	begin, end := Markers(m)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		block := begin + "\n" + table + end
		if doc = strings.TrimRight(doc, "\n"); doc == "" {
			return block + "\n"
		}
		return doc + "\n\n" + block + "\n"
	}
	old := doc[i+len(begin) : j]
	return doc[:i] + begin + "\n" + mergeRows(old, table) + end + doc[j+len(end):]
}

// mergeRows merges the rows of table into those of old, by workload (a
// row's first cell); the header is table's.
func mergeRows(old, table string) string {
	lines := strings.SplitAfter(strings.TrimRight(table, "\n")+"\n", "\n")
	lines = lines[:len(lines)-1] // after the last newline
	header, rows := lines[:min(2, len(lines))], lines[min(2, len(lines)):]
	fresh := map[string]string{}
	for _, r := range rows {
		fresh[rowName(r)] = r
	}
	var b strings.Builder
	for _, h := range header {
		b.WriteString(h)
	}
	for _, r := range strings.SplitAfter(old, "\n") {
		name := rowName(r)
		if name == "" || name == "workload" || strings.HasPrefix(name, "---") {
			continue
		}
		if f, ok := fresh[name]; ok {
			r = f
			delete(fresh, name)
		}
		if len(header) > 0 {
			r = pad(r, cells(header[0]))
		}
		b.WriteString(r)
	}
	for _, r := range rows {
		if _, ok := fresh[rowName(r)]; ok {
			b.WriteString(r)
		}
	}
	return b.String()
}

// cells counts the cells of a markdown table row.
func cells(line string) int { return strings.Count(strings.TrimSpace(line), " |") }

// pad gives a row of an earlier table the columns a newer header added
// at its end, empty ("—").
func pad(row string, want int) string {
	n := cells(row)
	if n >= want || !strings.HasSuffix(row, "|\n") {
		return row
	}
	return strings.TrimSuffix(row, "\n") + strings.Repeat(" — |", want-n) + "\n"
}

// rowName is the first cell of a markdown table row ("" if line is none).
func rowName(line string) string {
	if !strings.HasPrefix(line, "| ") {
		return ""
	}
	name, _, _ := strings.Cut(line[2:], " |")
	return name
}
