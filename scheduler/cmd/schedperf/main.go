// Command schedperf runs the DRA test cases of kube-scheduler's
// scheduler_perf with the in-tree DynamicResources plugin and with dractl's
// plugin in its place (see package schedperf) and prints one line per
// workload and plugin as it ends. Its last line is "N passed, M failed"
// over the workloads run with dractl's plugin; it exits non-zero if any of
// them failed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dractl/dractl/scheduler/schedperf"
)

func main() {
	repo := flag.String("repo", "..", "root of the dractl checkout to test")
	work := flag.String("work", "", "directory to copy scheduler_perf into and keep (default: a temporary one, removed)")
	bin := flag.String("bin", "", "directory for etcd and the logs of failed workloads (default: <repo>/bin)")
	runPattern := flag.String("run", "", "only the tests matching this go test -run pattern below TestSchedulerPerf, e.g. dra/dractl (no check that every workload ran)")
	timeout := flag.Duration("workload-timeout", 3*time.Minute, "cancel a workload that runs longer (the in-tree plugin's take seconds)")
	testArgs := flag.String("test-args", "", "space-separated flags for the test binary, e.g. -v=5 for the scheduler's reasons in the logs of failed workloads")
	verbose := flag.Bool("v", false, "print the go commands' output")
	bench := flag.Bool("bench", false, "run the performance workloads instead, in-tree, dractl and the floor in turn, and print their throughput")
	benchWorkloads := flag.String("bench-workloads", "", "with -bench: a regular expression over <suite>/<test case>/<workload>")
	benchRounds := flag.Int("bench-rounds", 1, "with -bench: rounds, each running every workload with every side")
	benchOut := flag.String("bench-out", "", "with -bench: a markdown file whose benchmark table (between its markers) is replaced")
	benchLog := flag.String("bench-log", "", "with -bench: make the table from this saved output of an earlier -bench -v run instead of running")
	versions := flag.String("versions", "", "space- or comma-separated Kubernetes minors to run, oldest first, or all (default: "+schedperf.Minors[0].Name+"); each runs its own kube-scheduler with its own dractl-scheduler build")
	toolchain := flag.String("toolchain", "", "GOTOOLCHAIN for the minors whose modules need a newer Go than this one (1.38: go1.27.3)")
	flag.Parse()
	minors, unserved := pick(*versions)
	base := schedperf.Options{Repo: *repo, Work: *work, Bin: *bin, Toolchain: *toolchain, TestArgs: strings.Fields(*testArgs)}
	if *verbose {
		base.Log = os.Stderr
	}
	if *bench {
		if isSet("workload-timeout") {
			base.WorkloadTimeout = *timeout
		}
		ok := len(unserved) == 0
		for _, m := range minors {
			opts := schedperf.BenchOptions{Options: base, Workloads: *benchWorkloads, Rounds: *benchRounds}
			opts.Minor = m
			fmt.Printf("Kubernetes %s (%s)\n", m.Name, m.Module)
			var err error
			if *benchLog != "" {
				err = tableFromLog(opts.Options, *benchLog, *benchOut)
			} else {
				err = runBench(opts, *benchOut)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "schedperf:", err)
				ok = false
			}
		}
		if !ok {
			os.Exit(1)
		}
		return
	}

	base.Run, base.WorkloadTimeout = *runPattern, *timeout
	passed, failed, ok := 0, 0, len(unserved) == 0
	for _, m := range minors {
		opts := base
		opts.Minor = m
		if len(minors) > 1 {
			fmt.Printf("Kubernetes %s (%s)\n", m.Name, m.Module)
		}
		rep, err := runMinor(opts)
		if err != nil {
			if !errors.Is(err, schedperf.ErrFailed) {
				fmt.Fprintf(os.Stderr, "schedperf: Kubernetes %s: %v\n", m.Name, err)
			}
			ok = false
		}
		if rep != nil {
			passed += rep.Count(schedperf.Dractl, "pass")
			failed += rep.Count(schedperf.Dractl, "fail")
		}
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if !ok {
		os.Exit(1)
	}
}

// pick returns the minors -versions names; one dractl-scheduler is not
// built for is reported on stderr and returned in unserved, so that the
// run fails after the others ran.
func pick(versions string) (minors []schedperf.Minor, unserved []string) {
	names := strings.FieldsFunc(versions, func(r rune) bool { return r == ',' || r == ' ' })
	switch {
	case len(names) == 0:
		return schedperf.Minors[:1], nil
	case len(names) == 1 && names[0] == "all":
		names = nil
		for name := range schedperf.Unserved {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, m := range schedperf.Minors {
			names = append(names, m.Name)
		}
	}
	for _, name := range names {
		m, err := schedperf.MinorNamed(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "schedperf:", err)
			unserved = append(unserved, name)
			continue
		}
		minors = append(minors, m)
	}
	return minors, unserved
}

// runMinor runs one minor's workloads, printing each as it ends, then
// the minor's summary.
func runMinor(opts schedperf.Options) (*schedperf.Report, error) {
	failedInTree := map[string]bool{}
	seen := 0
	opts.Progress = func(c schedperf.Case) {
		seen++
		if c.Plugin == schedperf.InTree && c.Result == "fail" {
			failedInTree[c.Suite+"/"+c.Name()] = true
		}
		fmt.Println(line(c, failedInTree[c.Suite+"/"+c.Name()]))
	}
	rep, err := schedperf.Run(opts)
	if err != nil {
		return nil, err
	}
	for _, c := range rep.Cases[seen:] {
		fmt.Println(line(c, rep.Failed(schedperf.InTree, c)))
	}
	if n := rep.Count(schedperf.InTree, "fail"); n > 0 {
		fmt.Printf("%d workloads fail with the in-tree plugin here as well\n", n)
	}
	fmt.Printf("Kubernetes %s: wall time of the test %s; %d passed, %d failed\n", opts.Minor.Name, rep.Wall.Round(time.Second),
		rep.Count(schedperf.Dractl, "pass"), rep.Count(schedperf.Dractl, "fail"))
	return rep, rep.Check()
}

// line is a case's report: PASS|FAIL <test case>/<workload> <plugin>
// (<duration>), a failure's message indented below it.
func line(c schedperf.Case, inTreeFails bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s (%s", strings.ToUpper(c.Result), c.Name(), c.Plugin, c.Elapsed.Round(100*time.Millisecond))
	if c.Plugin == schedperf.Dractl && c.Result == "fail" && inTreeFails {
		b.WriteString(", fails with the in-tree plugin too")
	}
	b.WriteString(")")
	if c.Message != "" {
		b.WriteString("\n    " + strings.ReplaceAll(c.Message, "\n", "\n    "))
	}
	if c.LogErrors > 0 {
		fmt.Fprintf(&b, "\n    most frequent error in the log (%d times): %s", c.LogErrors, c.LogError)
	}
	if c.Log != "" {
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, c.Log); err == nil {
				c.Log = rel
			}
		}
		b.WriteString("\n    log: " + c.Log)
		if c.LogTruncated {
			fmt.Fprintf(&b, " (its first %d MiB)", schedperf.MaxLogSize>>20)
		}
	}
	return b.String()
}

func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// runBench prints the table and, with out, splices it into that file.
func runBench(opts schedperf.BenchOptions, out string) error {
	rows, err := schedperf.Bench(opts)
	if len(rows) == 0 {
		return err
	}
	if werr := writeTable(rows, out, opts.Minor); werr != nil {
		return werr
	}
	// Workloads that did not end are in the table; the error says why.
	return err
}

// tableFromLog makes the table of a saved run's output.
func tableFromLog(opts schedperf.Options, log, out string) error {
	f, err := os.Open(log)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := schedperf.BenchFromLog(opts, f)
	if err != nil {
		return fmt.Errorf("%s: %w", log, err)
	}
	return writeTable(rows, out, opts.Minor)
}

func writeTable(rows []schedperf.BenchRow, out string, m schedperf.Minor) error {
	table := schedperf.Table(rows)
	fmt.Print(table)
	if out == "" {
		return nil
	}
	doc, err := os.ReadFile(out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(out, []byte(schedperf.SpliceAt(string(doc), table, m)), 0o644)
}
