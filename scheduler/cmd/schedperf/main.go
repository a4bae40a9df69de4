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
	flag.Parse()
	if *bench {
		opts := schedperf.BenchOptions{Options: schedperf.Options{Repo: *repo, Work: *work, Bin: *bin, TestArgs: strings.Fields(*testArgs)},
			Workloads: *benchWorkloads, Rounds: *benchRounds}
		if *verbose {
			opts.Log = os.Stderr
		}
		if isSet("workload-timeout") {
			opts.WorkloadTimeout = *timeout
		}
		if *benchLog != "" {
			if err := tableFromLog(*repo, *benchLog, *benchOut); err != nil {
				fmt.Fprintln(os.Stderr, "schedperf:", err)
				os.Exit(1)
			}
			return
		}
		if err := runBench(opts, *benchOut); err != nil {
			fmt.Fprintln(os.Stderr, "schedperf:", err)
			os.Exit(1)
		}
		return
	}

	opts := schedperf.Options{Repo: *repo, Work: *work, Bin: *bin, Run: *runPattern, WorkloadTimeout: *timeout, TestArgs: strings.Fields(*testArgs)}
	if *verbose {
		opts.Log = os.Stderr
	}
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
		fmt.Fprintln(os.Stderr, "schedperf:", err)
		os.Exit(1)
	}
	for _, c := range rep.Cases[seen:] {
		fmt.Println(line(c, rep.Failed(schedperf.InTree, c)))
	}
	if n := rep.Count(schedperf.InTree, "fail"); n > 0 {
		fmt.Printf("%d workloads fail with the in-tree plugin here as well\n", n)
	}
	fmt.Printf("wall time of the test: %s\n", rep.Wall.Round(time.Second))
	fmt.Printf("%d passed, %d failed\n", rep.Count(schedperf.Dractl, "pass"), rep.Count(schedperf.Dractl, "fail"))
	if err := rep.Check(); err != nil {
		if !errors.Is(err, schedperf.ErrFailed) {
			fmt.Fprintln(os.Stderr, "schedperf:", err)
		}
		os.Exit(1)
	}
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
	if werr := writeTable(rows, out); werr != nil {
		return werr
	}
	// Workloads that did not end are in the table; the error says why.
	return err
}

// tableFromLog makes the table of a saved run's output.
func tableFromLog(repo, log, out string) error {
	f, err := os.Open(log)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := schedperf.BenchFromLog(repo, f)
	if err != nil {
		return fmt.Errorf("%s: %w", log, err)
	}
	return writeTable(rows, out)
}

func writeTable(rows []schedperf.BenchRow, out string) error {
	table := schedperf.Table(rows)
	fmt.Print(table)
	if out == "" {
		return nil
	}
	doc, err := os.ReadFile(out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(out, []byte(schedperf.Splice(string(doc), table)), 0o644)
}
