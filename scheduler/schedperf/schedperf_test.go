package schedperf

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// A go test -json stream: an in-tree workload that passes, a dractl
// workload that fails with its output, one skipped by the label filter,
// a suite that fails before any workload runs, a test case that fails
// because its workload failed (reported once, as the workload), and a
// workload that never ends.
const stream = `{"Action":"run","Test":"TestSchedulerPerf"}
{"Action":"run","Test":"TestSchedulerPerf/dra"}
{"Action":"run","Test":"TestSchedulerPerf/dra/in-tree"}
{"Action":"run","Test":"TestSchedulerPerf/dra/in-tree/A"}
{"Action":"run","Test":"TestSchedulerPerf/dra/in-tree/A/fast"}
{"Action":"output","Test":"TestSchedulerPerf/dra/in-tree/A/fast","Output":"=== RUN   TestSchedulerPerf/dra/in-tree/A/fast\n"}
{"Action":"pass","Test":"TestSchedulerPerf/dra/in-tree/A/fast","Elapsed":6.5}
{"Action":"run","Test":"TestSchedulerPerf/dra/in-tree/A/big"}
{"Action":"output","Test":"TestSchedulerPerf/dra/in-tree/A/big","Output":"    scheduler_perf.go:938: disabled by label filter\n"}
{"Action":"skip","Test":"TestSchedulerPerf/dra/in-tree/A/big","Elapsed":0}
{"Action":"pass","Test":"TestSchedulerPerf/dra/in-tree/A","Elapsed":7}
{"Action":"pass","Test":"TestSchedulerPerf/dra/in-tree","Elapsed":7}
{"Action":"run","Test":"TestSchedulerPerf/dra/dractl"}
{"Action":"run","Test":"TestSchedulerPerf/dra/dractl/A"}
{"Action":"run","Test":"TestSchedulerPerf/dra/dractl/A/fast"}
{"Action":"output","Test":"TestSchedulerPerf/dra/dractl/A/fast","Output":"    operations.go:143: Created 10 item(s) from ../templates/slice.yaml in cluster scope:\n"}
{"Action":"output","Test":"TestSchedulerPerf/dra/dractl/A/fast","Output":"        kind: ResourceSlice\n"}
{"Action":"output","Test":"TestSchedulerPerf/dra/dractl/A/fast","Output":"    scheduler_perf.go:960: FATAL ERROR: Error running workload fast: op 6:\n"}
{"Action":"output","Test":"TestSchedulerPerf/dra/dractl/A/fast","Output":"        timed out\n"}
{"Action":"output","Test":"TestSchedulerPerf/dra/dractl/A/fast","Output":"    reflector.go:507: I1128 01:20:15.955582] Caches populated\n"}
{"Action":"output","Test":"TestSchedulerPerf/dra/dractl/A/fast","Output":"    adapter_test.go:170: ERROR: check: pod test/p-1 has no claim\n"}
{"Action":"output","Test":"TestSchedulerPerf/dra/dractl/A/fast","Output":"--- FAIL: TestSchedulerPerf/dra/dractl/A/fast (30.00s)\n"}
{"Action":"fail","Test":"TestSchedulerPerf/dra/dractl/A/fast","Elapsed":30}
{"Action":"fail","Test":"TestSchedulerPerf/dra/dractl/A","Elapsed":30}
{"Action":"fail","Test":"TestSchedulerPerf/dra/dractl","Elapsed":30}
{"Action":"fail","Test":"TestSchedulerPerf/dra","Elapsed":37}
{"Action":"run","Test":"TestSchedulerPerf/devicetaints"}
{"Action":"run","Test":"TestSchedulerPerf/devicetaints/dractl"}
{"Action":"output","Test":"TestSchedulerPerf/devicetaints/dractl","Output":"    adapter_test.go:120: performance-config.yaml: bad yaml\n"}
{"Action":"fail","Test":"TestSchedulerPerf/devicetaints/dractl","Elapsed":0}
{"Action":"fail","Test":"TestSchedulerPerf/devicetaints","Elapsed":0}
{"Action":"run","Test":"TestSchedulerPerf/prioritizedlist"}
{"Action":"run","Test":"TestSchedulerPerf/prioritizedlist/in-tree"}
{"Action":"run","Test":"TestSchedulerPerf/prioritizedlist/in-tree/B"}
{"Action":"run","Test":"TestSchedulerPerf/prioritizedlist/in-tree/B/fast"}
{"Action":"output","Test":"TestSchedulerPerf/prioritizedlist/in-tree/B/fast","Output":"panic: test timed out after 3h0m0s\n"}
`

func TestParse(t *testing.T) {
	var ended []string
	cases, err := parse(strings.NewReader(stream), func(c *Case) {
		ended = append(ended, c.Plugin+" "+c.Name())
		c.Log = "seen"
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cases {
		got = append(got, c.Plugin+" "+c.Name())
	}
	want := []string{"in-tree A/fast", "dractl A/fast", "dractl devicetaints", "in-tree B/fast"}
	if !slices.Equal(got, want) {
		t.Fatalf("cases %q, want %q: skipped workloads and groups whose workload failed are no cases", got, want)
	}
	if !slices.Equal(ended, want) {
		t.Errorf("reported as they ended: %q, want %q", ended, want)
	}
	for _, c := range cases {
		if c.Log != "seen" {
			t.Errorf("%s %s: what the callback added is lost", c.Plugin, c.Name())
		}
	}
	if c := cases[0]; c.Result != "pass" || c.Elapsed != 6500*time.Millisecond || c.Suite != "dra" || c.Message != "" {
		t.Errorf("in-tree A/fast = %+v, want a pass of 6.5s in suite dra without a message", c)
	}
	if c, want := cases[1], "scheduler_perf.go:960: FATAL ERROR: Error running workload fast: op 6:\ntimed out\nadapter_test.go:170: ERROR: check: pod test/p-1 has no claim"; c.Result != "fail" || c.Message != want {
		t.Errorf("dractl A/fast = %+v, want a failure with the errors' lines, not the workload's log:\n%s", c, want)
	}
	if c := cases[2]; c.Result != "fail" || c.Suite != "devicetaints" || c.Workload != "" || !strings.Contains(c.Message, "bad yaml") {
		t.Errorf("devicetaints = %+v, want the suite's own failure", c)
	}
	if c := cases[3]; c.Result != "fail" || !strings.Contains(c.Message, "did not end") || !strings.Contains(c.Message, "panic: test timed out") {
		t.Errorf("in-tree B/fast = %+v, want a failure: it never ended", c)
	}
}

func TestFailureMessage(t *testing.T) {
	var errs, logs []string
	errs = append(errs, "    scheduler_perf.go:960: FATAL ERROR: Error running workload fast:")
	for i := range maxMessageLines + 5 {
		errs = append(errs, fmt.Sprintf("        goroutine %d", i))
		logs = append(logs, fmt.Sprintf("    leak.go:1: goroutine %d", i))
	}
	lines := strings.Split(failureMessage(errs), "\n")
	if len(lines) != maxMessageLines+1 || lines[maxMessageLines] != "... 6 more lines" {
		t.Errorf("a long error: %d lines ending %q, want %d and a count of the rest", len(lines), lines[len(lines)-1], maxMessageLines+1)
	}
	// Without a ktesting error (a leak check, a panic), the last lines.
	lines = strings.Split(failureMessage(logs), "\n")
	if len(lines) != maxMessageLines || lines[0] != "leak.go:1: goroutine 5" || lines[maxMessageLines-1] != fmt.Sprintf("leak.go:1: goroutine %d", maxMessageLines+4) {
		t.Errorf("no error entry: %q, want the last %d lines", lines, maxMessageLines)
	}
	if got := failureMessage(nil); got != "failed without a message" {
		t.Errorf("no output: %q", got)
	}
}

func TestSelectWorkloads(t *testing.T) {
	const config = `
- name: A
  workloads:
  - name: fast
    labels: [integration-test, short]
  - name: big
    labels: [performance]
  - name: both
    labels: [integration-test, performance]
  - name: none
- name: B
  labels: [integration-test]
  workloads:
  - name: inherits
  - name: excluded
    labels: [performance]
`
	ws, err := selectWorkloads("dra", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	want := []workload{{"dra", "A", "fast"}, {"dra", "B", "inherits"}}
	if !slices.Equal(ws, want) {
		t.Errorf("selected %v, want %v", ws, want)
	}
	if _, err := selectWorkloads("dra", []byte("- name: [")); err == nil {
		t.Error("bad YAML: no error")
	}
}

func TestExpected(t *testing.T) {
	dra := t.TempDir()
	write(t, filepath.Join(dra, "performance-config.yaml"), "- name: A\n  workloads:\n  - name: fast\n    labels: [integration-test]\n")
	write(t, filepath.Join(dra, "extendedresource", "scoring", "performance-config.yaml"), "- name: S\n  workloads:\n  - name: fast\n    labels: [integration-test]\n")
	write(t, filepath.Join(dra, "templates", "pod.yaml"), "kind: Pod\n")
	ws, err := expected(dra)
	if err != nil {
		t.Fatal(err)
	}
	want := []workload{{"extendedresource-scoring", "S", "fast"}, {"dra", "A", "fast"}}
	slices.SortFunc(ws, func(a, b workload) int { return strings.Compare(b.suite, a.suite) })
	if !slices.Equal(ws, want) {
		t.Errorf("expected %v, want %v (suites named as the adapter names them)", ws, want)
	}
}

func TestMissing(t *testing.T) {
	cases := []Case{
		{Suite: "dra", Plugin: InTree, TestCase: "A", Workload: "fast", Result: "pass"},
		// The same names in another suite do not count.
		{Suite: "other", Plugin: Dractl, TestCase: "A", Workload: "fast", Result: "pass"},
	}
	got := missing(cases, []workload{{"dra", "A", "fast"}})
	if len(got) != 1 || got[0].Plugin != Dractl || got[0].Name() != "A/fast" || got[0].Result != "fail" || got[0].Message != "did not run" {
		t.Errorf("missing = %+v, want dractl's A/fast failed as not run", got)
	}
}

func TestReport(t *testing.T) {
	fail := Case{Suite: "dra", Plugin: InTree, TestCase: "A", Workload: "fast", Result: "fail"}
	rep := &Report{Cases: []Case{
		fail,
		{Suite: "dra", Plugin: Dractl, TestCase: "A", Workload: "fast", Result: "pass"},
	}}
	if err := rep.Check(); err != nil {
		t.Errorf("only in-tree failed: %v, want no error", err)
	}
	if rep.Count(Dractl, "pass") != 1 || rep.Count(InTree, "fail") != 1 || rep.Count(Dractl, "fail") != 0 {
		t.Errorf("counts wrong: %+v", rep.Cases)
	}
	if !rep.Failed(InTree, rep.Cases[1]) || rep.Failed(Dractl, rep.Cases[0]) {
		t.Error("Failed: want in-tree's failure of the same workload found, and no dractl failure")
	}
	rep.Cases = append(rep.Cases, Case{Suite: "dra", Plugin: Dractl, TestCase: "B", Workload: "fast", Result: "fail"})
	if err := rep.Check(); !errors.Is(err, ErrFailed) {
		t.Errorf("a dractl failure: %v, want ErrFailed", err)
	}
	if err := (&Report{Cases: []Case{fail}}).Check(); !errors.Is(err, ErrFailed) {
		t.Errorf("no dractl case at all: %v, want ErrFailed", err)
	}
}

func TestCaseName(t *testing.T) {
	for _, tc := range []struct {
		c    Case
		want string
	}{
		{Case{Suite: "dra", TestCase: "A", Workload: "fast"}, "A/fast"},
		{Case{Suite: "dra", TestCase: "A"}, "A"},
		{Case{Suite: "dra"}, "dra"},
	} {
		if got := tc.c.Name(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}

func TestLogFile(t *testing.T) {
	dir := t.TempDir()
	c := Case{Suite: "extendedresource-scoring", Plugin: Dractl, TestCase: "ExtendedResourceScoring", Workload: "fast", Result: "fail"}
	// scheduler_perf names the file after the test, every character but
	// letters, digits, '-' and '_' as '_'.
	name := filepath.Join(dir, "TestSchedulerPerf_extendedresource-scoring_dractl_ExtendedResourceScoring_fast.log")
	if got := logFile(dir, c); got != "" {
		t.Errorf("no log yet: %q", got)
	}
	write(t, name, "log")
	if got := logFile(dir, c); got != name {
		t.Errorf("log %q, want %q", got, name)
	}
	c.Result = "pass"
	if got := logFile(dir, c); got != "" {
		t.Errorf("a passing workload has no log: %q", got)
	}
}

func TestCopyPerf(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	for _, f := range []string{"util.go", "util_test.go", "templates/pod.yaml", "dra/performance-config.yaml",
		"dra/dra_test.go", "dra/templates/claim.yaml", "dra/prioritizedlist/performance-config.yaml", "affinity/affinity_test.go", "affinity/config.yaml"} {
		write(t, filepath.Join(src, f), f)
	}
	if err := copyPerf(src, dst); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dst, path)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"dra/performance-config.yaml", "dra/prioritizedlist/performance-config.yaml", "dra/templates/claim.yaml", "util.go"}
	if !slices.Equal(got, want) {
		t.Errorf("copied %q, want %q: the package and dra's data, no upstream tests", got, want)
	}
	if data, _ := os.ReadFile(filepath.Join(dst, "dra/templates/claim.yaml")); string(data) != "dra/templates/claim.yaml" {
		t.Errorf("content %q", data)
	}
}

// TestModuleVersion keeps each minor's Module the k8s.io/kubernetes that
// its dractl-scheduler is built with, and its tags the ones its build
// files are behind.
func TestModuleVersion(t *testing.T) {
	for _, m := range Minors {
		data, err := os.ReadFile(filepath.Join("..", "..", m.Dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		path, version, _ := strings.Cut(m.Module, "@")
		if !regexp.MustCompile(`\n\t` + regexp.QuoteMeta(path+" "+version) + `( // indirect)?\n`).Match(data) {
			t.Errorf("%s/go.mod does not require %s %s", m.Dir, path, version)
		}
		if m.Tags != "" {
			if _, err := os.Stat(filepath.Join("..", "app", "minor_"+m.Tags+".go")); err != nil {
				t.Errorf("Kubernetes %s: tag %s has no build file of its own in scheduler/app: %v", m.Name, m.Tags, err)
			}
		}
	}
}

func TestMinorNamed(t *testing.T) {
	for _, m := range Minors {
		if got, err := MinorNamed(m.Name); err != nil || got.Module != m.Module {
			t.Errorf("MinorNamed(%q) = %v, %v", m.Name, got, err)
		}
	}
	if _, err := MinorNamed("1.36"); err == nil || !strings.Contains(err.Error(), "not built for Kubernetes 1.36") {
		t.Errorf("MinorNamed(1.36): %v, want why 1.36 is not served", err)
	}
	if _, err := MinorNamed("1.99"); err == nil || !strings.Contains(err.Error(), "built for 1.37, 1.38") {
		t.Errorf("MinorNamed(1.99): %v, want the minors there are", err)
	}
}

// TestForMinor: the adapters are written for 1.37's test context package
// and get each minor's; an adapter that imports another ktesting fails.
func TestForMinor(t *testing.T) {
	m138, err := MinorNamed("1.38")
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string][]byte{"adapter": adapter, "bench": benchAdapter, "option": perfOption} {
		got, err := forMinor(src, m138)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if bytes.Contains(got, []byte(adapterKTesting)) {
			t.Errorf("%s still imports %s for 1.38", name, adapterKTesting)
		}
		if bytes.Contains(src, []byte(adapterKTesting)) != bytes.Contains(got, []byte(`"k8s.io/client-go/ktesting"`)) {
			t.Errorf("%s: the import was not rewritten to 1.38's", name)
		}
		if same, _ := forMinor(src, Minors[0]); !bytes.Equal(same, src) {
			t.Errorf("%s is rewritten for 1.37", name)
		}
	}
	if !bytes.Contains(adapter, []byte(adapterKTesting)) {
		t.Errorf("the adapter does not import %s: adapterKTesting is stale", adapterKTesting)
	}
	if _, err := forMinor([]byte(`import "k8s.io/other/ktesting"`), m138); err == nil {
		t.Error("an adapter importing another ktesting package was rewritten silently")
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTruncateLog(t *testing.T) {
	dir := t.TempDir()
	small, big := filepath.Join(dir, "small.log"), filepath.Join(dir, "big.log")
	write(t, small, "short\n")
	write(t, big, "")
	if err := os.Truncate(big, MaxLogSize+1); err != nil {
		t.Fatal(err)
	}
	if truncateLog(small) || truncateLog("") {
		t.Error("a small log or none was truncated")
	}
	if !truncateLog(big) {
		t.Error("a big log was not truncated")
	}
	if fi, err := os.Stat(big); err != nil || fi.Size() != MaxLogSize {
		t.Errorf("big log after truncating: %v, %v; want %d bytes", fi.Size(), err, MaxLogSize)
	}
}

func TestCommonError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	write(t, path, `I1128 01:20:15.9 1 reflector.go:507] "Caches populated"
E1128 01:20:16.0 1 schedule_one.go:1] "Error scheduling pod" err="timed out" pod="test/a"
E1128 01:20:16.1 1 schedule_one.go:1] "Error scheduling pod" err="running Reserve plugin \"DractlDynamicResources\": no allocation for node n-0" pod="test/a"
E1128 01:20:16.2 1 schedule_one.go:1] "Error scheduling pod" err="running Reserve plugin \"DractlDynamicResources\": no allocation for node n-0" pod="test/b"
`)
	msg, n := commonError(path)
	if want := `running Reserve plugin "DractlDynamicResources": no allocation for node n-0`; msg != want || n != 2 {
		t.Errorf("commonError = %q, %d; want %q, 2", msg, n, want)
	}
	if msg, n := repeated(commonError(path)); msg != "" || n != 0 {
		t.Errorf("an error seen twice is reported: %q, %d", msg, n)
	}
	if msg, n := repeated("again", repeatedError); msg != "again" || n != repeatedError {
		t.Errorf("an error seen %d times is not reported: %q, %d", repeatedError, msg, n)
	}
	if msg, n := commonError(""); msg != "" || n != 0 {
		t.Errorf("no log: %q, %d", msg, n)
	}
	clean := filepath.Join(t.TempDir(), "clean.log")
	write(t, clean, "I1128 all good\n")
	if msg, n := commonError(clean); msg != "" || n != 0 {
		t.Errorf("a log without errors: %q, %d", msg, n)
	}
}
