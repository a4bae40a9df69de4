// Package schedperf runs the DRA test cases of kube-scheduler's
// scheduler_perf (test/integration/scheduler_perf/dra of k8s.io/kubernetes)
// twice: with the in-tree DynamicResources plugin and with dractl's plugin
// in its place, registered as dractl-scheduler registers it.
//
// Run copies scheduler_perf's package and its DRA configurations from the
// Go module cache into a temporary module, adds testdata/perf_option.go to
// the package (an option that hands RunIntegrationPerfScheduling an
// out-of-tree plugin registry) and testdata/adapter_test.go beside it (the
// test that runs every suite with both plugins), points the module at this
// checkout of dractl, builds etcd from the module proxy for the
// integration framework, runs the test there and reports every workload.
// Nothing of upstream's is kept in this repository.
package schedperf

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Minor is a Kubernetes minor dractl-scheduler is built for: the
// kube-scheduler whose scheduler_perf judges that build, and where the
// build lives (docs/versions.md, "The shape chosen for more than one
// minor").
type Minor struct {
	// Name is the minor, as make schedperf's SCHEDPERF_VERSIONS names it.
	Name string
	// Module is the k8s.io/kubernetes whose scheduler_perf is run: the
	// version the minor's scheduler module requires, so that dractl's
	// plugin runs in the kube-scheduler it ships with.
	Module string
	// Dir is the minor's scheduler module, relative to the checkout.
	Dir string
	// Tags are the build tags of the minor's build.
	Tags string
	// NewerGo: the minor's modules need a newer Go than the machine's
	// (Options.Toolchain).
	NewerGo bool
	// ktesting is the package of scheduler_perf's test context, which the
	// adapter names: 1.38 moved it into client-go.
	ktesting string
}

// Minors are the minors make schedperf can run, oldest first.
var Minors = []Minor{
	{Name: "1.37", Module: "k8s.io/kubernetes@v1.37.2", Dir: "scheduler",
		ktesting: adapterKTesting},
	{Name: "1.38", Module: "k8s.io/kubernetes@v1.38.0-beta.0", Dir: "scheduler/k8s138", Tags: "k8s138", NewerGo: true,
		ktesting: "k8s.io/client-go/ktesting"},
}

// Unserved are minors dractl-scheduler is not built for, each with why:
// asking for one is an error that says so.
var Unserved = map[string]string{
	"1.36": "dractl-scheduler is not built for Kubernetes 1.36: kube-scheduler 1.36 does not compile beside the resource.k8s.io/v1 types of 1.37 that dractl is written on (docs/versions.md, \"Measured: why 1.36 cannot be served honestly\")",
}

// MinorNamed returns the minor of that name, or an error naming the ones
// there are.
func MinorNamed(name string) (Minor, error) {
	for _, m := range Minors {
		if m.Name == name {
			return m, nil
		}
	}
	if why, ok := Unserved[name]; ok {
		return Minor{}, errors.New(why)
	}
	var names []string
	for _, m := range Minors {
		names = append(names, m.Name)
	}
	return Minor{}, fmt.Errorf("no Kubernetes minor %q: dractl-scheduler is built for %s", name, strings.Join(names, ", "))
}

// adapterKTesting is the test context package the adapter's source
// imports (1.37's).
const adapterKTesting = "k8s.io/kubernetes/test/utils/client-go/ktesting"

// etcdPackage is the main package of etcd, at the version the module
// graph of k8s.io/kubernetes selects.
const etcdPackage = "go.etcd.io/etcd/server/v3"

// Paths inside the module copy.
const (
	perfDir    = "perf"   // scheduler_perf's package
	adapterDir = "dractl" // the test
	modulePath = "schedperf"
	upstream   = "test/integration/scheduler_perf"
)

// Plugins, as the test names them.
const (
	InTree = "in-tree"
	Dractl = "dractl"
)

// labelFilter selects the workloads scheduler_perf's integration test runs
// by default (its -test-scheduling-label-filter).
var labelFilter = []string{"integration-test", "-performance"}

var (
	//go:embed testdata/perf_option.go
	perfOption []byte
	//go:embed testdata/adapter_test.go
	adapter []byte
	//go:embed testdata/bench_test.go
	benchAdapter []byte
)

// Options configure Run.
type Options struct {
	// Repo is the root of the dractl checkout to test.
	Repo string
	// Minor is the kube-scheduler to run; the zero value is Minors[0].
	Minor Minor
	// Toolchain is the GOTOOLCHAIN of a minor whose modules need a newer
	// Go than the machine's (the Makefile's GOTOOLCHAIN_138).
	Toolchain string
	// Work is the directory the module is copied into; empty means a new
	// temporary directory, removed afterwards. A Work directory that holds
	// a prepared copy already is reused: only the adapter is rewritten.
	Work string
	// Bin is where etcd is built and where the logs of failed workloads
	// go (Bin/schedperf/<minor>/etcd and logs); default Repo/bin.
	Bin string
	// Run, if set, is the go test -run pattern below TestSchedulerPerf
	// (for example "dra/dractl"); a partial run does not check that every
	// workload ran.
	Run string
	// TestArgs are passed to the test binary after the adapter's own, for
	// example -v=5 for the scheduler's reasons in the logs.
	TestArgs []string
	// WorkloadTimeout, if set, cancels a workload that runs longer (the
	// adapter's default is 3 minutes; in-tree's take seconds).
	WorkloadTimeout time.Duration
	// Log receives the go commands' own output (downloads, build errors).
	Log io.Writer
	// Progress, if set, is called with every case as it ends.
	Progress func(Case)
}

// Case is the outcome of one workload with one plugin, or of a group of
// them that failed on its own (Workload empty): a suite whose
// configuration could not be read fails without any workload.
type Case struct {
	Suite    string // directory below dra, "dra" for dra itself, "/" as "-"
	Plugin   string // InTree or Dractl
	TestCase string
	Workload string
	Result   string // "pass" or "fail"
	Elapsed  time.Duration
	// Message is the test's own output for a failure.
	Message string
	// Log is the scheduler's, apiserver's and etcd's log of a failed
	// workload, if it was kept.
	Log string
	// LogError is the error the log has most often, and LogErrors how
	// often, if at least repeatedError times: a plugin that fails the same
	// way in every cycle says so there and nowhere else.
	LogError  string
	LogErrors int
	// LogTruncated: the log was cut to its first MaxLogSize bytes.
	LogTruncated bool
}

// Name is <test case>/<workload>; a group that failed on its own is
// named by its test case, or by its suite.
func (c Case) Name() string {
	switch {
	case c.TestCase == "":
		return c.Suite
	case c.Workload == "":
		return c.TestCase
	}
	return c.TestCase + "/" + c.Workload
}

// key identifies a workload of a suite across plugins.
func (c Case) key() string { return c.Suite + "/" + c.Name() }

// Report is every case of one run, in the order they ended.
type Report struct {
	Cases []Case
	// Wall is the wall time of the test, from start to exit, without
	// preparing the module or building etcd.
	Wall time.Duration
}

// Count returns the number of cases of plugin with the result.
func (r *Report) Count(plugin, result string) int {
	n := 0
	for _, c := range r.Cases {
		if c.Plugin == plugin && c.Result == result {
			n++
		}
	}
	return n
}

// Failed reports whether the case of the other plugin for the same
// workload failed.
func (r *Report) Failed(plugin string, c Case) bool {
	return slices.ContainsFunc(r.Cases, func(o Case) bool {
		return o.Plugin == plugin && o.key() == c.key() && o.Result == "fail"
	})
}

// Run prepares the module copy and runs the test in it.
func Run(opts Options) (*Report, error) {
	env, err := setUp(&opts)
	if err != nil {
		return nil, err
	}
	defer env.cleanup()
	mod, logs := env.mod, env.logs
	want, err := expected(filepath.Join(mod, perfDir, "dra"))
	if err != nil {
		return nil, err
	}

	pattern := "^TestSchedulerPerf$"
	if opts.Run != "" {
		pattern += "/" + opts.Run
	}
	pr, pw := io.Pipe()
	type parsed struct {
		cases []Case
		err   error
	}
	done := make(chan parsed, 1)
	go func() {
		cases, err := parse(pr, func(c *Case) {
			c.Log = logFile(logs, *c)
			c.LogError, c.LogErrors = repeated(commonError(c.Log))
			c.LogTruncated = truncateLog(c.Log)
			if opts.Progress != nil {
				opts.Progress(*c)
			}
		})
		// Drain what is left so that the test never blocks on its output.
		_, _ = io.Copy(io.Discard, pr)
		done <- parsed{cases, err}
	}()
	start := time.Now()
	// -vet=off: the package is upstream's; a failing workload makes go
	// test exit non-zero, and the report says which.
	args := []string{"go", "test", "-json", "-count=1", "-vet=off", "-timeout=3h", "-tags=" + opts.Minor.Tags, "-run", pattern, "./" + adapterDir}
	args = append(args, "-args")
	if opts.WorkloadTimeout > 0 {
		args = append(args, "-workload-timeout="+opts.WorkloadTimeout.String())
	}
	args = append(args, opts.TestArgs...)
	testErr := run(mod, opts.Log, pw, env.vars, args...)
	wall := time.Since(start)
	pw.Close()
	res := <-done
	if res.err != nil {
		return nil, res.err
	}
	rep := &Report{Cases: res.cases, Wall: wall}
	if opts.Run == "" {
		rep.Cases = append(rep.Cases, missing(rep.Cases, want)...)
	}
	if len(rep.Cases) == 0 {
		return nil, fmt.Errorf("no workload ran: %v", testErr)
	}
	return rep, nil
}

// goEnv is what every go command of the minor needs: its toolchain when
// the machine's Go is too old for it.
func (o Options) goEnv() []string {
	if o.Minor.NewerGo {
		return []string{"GOTOOLCHAIN=" + o.Toolchain}
	}
	return nil
}

// runEnv is a prepared module copy, etcd built, and the environment the
// test runs in.
type runEnv struct {
	minor     Minor
	mod, logs string
	// goEnv is what every go command of the minor needs (GOTOOLCHAIN),
	// vars that and what the test needs.
	goEnv, vars []string
	cleanup     func()
}

// setUp prepares the module copy in opts.Work (a temporary directory if
// empty) and builds etcd into opts.Bin; it sets the defaults of opts.
func setUp(opts *Options) (*runEnv, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Minor.Name == "" {
		opts.Minor = Minors[0]
	}
	if opts.Minor.NewerGo && opts.Toolchain == "" {
		return nil, fmt.Errorf("Kubernetes %s needs a newer Go than this one: set Options.Toolchain (GOTOOLCHAIN)", opts.Minor.Name)
	}
	repo, err := filepath.Abs(opts.Repo)
	if err != nil {
		return nil, err
	}
	bin := opts.Bin
	if bin == "" {
		bin = filepath.Join(repo, "bin")
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return nil, err
	}
	bin = filepath.Join(bin, "schedperf", opts.Minor.Name)
	env := &runEnv{cleanup: func() {}, minor: opts.Minor, goEnv: opts.goEnv()}
	work := opts.Work
	if work == "" {
		if work, err = os.MkdirTemp("", "schedperf-"); err != nil {
			return nil, err
		}
		env.cleanup = func() { removeAll(work) }
	}
	ok := false
	defer func() {
		if !ok {
			env.cleanup()
		}
	}()
	env.mod = filepath.Join(work, "module-"+opts.Minor.Name)
	if err := env.prepare(repo, opts.Log); err != nil {
		return nil, err
	}
	// The integration framework starts etcd from PATH.
	if err := run(env.mod, opts.Log, nil, env.goEnv, "go", "build", "-o", filepath.Join(bin, "etcd"), etcdPackage); err != nil {
		return nil, fmt.Errorf("building etcd: %w", err)
	}
	env.logs = filepath.Join(bin, "logs")
	if err := os.RemoveAll(env.logs); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(env.logs, 0o755); err != nil {
		return nil, err
	}
	env.vars = append(slices.Clone(env.goEnv),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		// scheduler_perf writes each workload's log to a file there and
		// removes it when the workload passes.
		"ARTIFACTS="+env.logs,
	)
	ok = true
	return env, nil
}

// prepare makes env.mod a module holding scheduler_perf's package, its
// DRA configurations and the adapter, on this checkout of dractl.
func (env *runEnv) prepare(repo string, log io.Writer) error {
	mod, minor := env.mod, env.minor
	marker := filepath.Join(mod, ".prepared")
	if _, err := os.Stat(marker); err != nil {
		src, err := moduleDir(filepath.Join(repo, minor.Dir), minor.Module, env.goEnv, log)
		if err != nil {
			return err
		}
		if err := copyPerf(filepath.Join(src, upstream), filepath.Join(mod, perfDir)); err != nil {
			return err
		}
		// The minor's scheduler module pins k8s.io/kubernetes and its
		// staging modules at the versions dractl-scheduler is built with.
		for _, f := range []string{"go.mod", "go.sum"} {
			data, err := os.ReadFile(filepath.Join(repo, minor.Dir, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(mod, f), data, 0o644); err != nil {
				return err
			}
		}
		const noVersion = "v0.0.0-00010101000000-000000000000"
		// Replacing the checkout's paths also replaces the relative ones
		// of a per-minor module.
		if err := run(mod, log, nil, env.goEnv, "go", "mod", "edit", "-module="+modulePath,
			"-replace=github.com/dractl/dractl="+repo,
			"-require=github.com/dractl/dractl/scheduler@"+noVersion,
			"-replace=github.com/dractl/dractl/scheduler="+filepath.Join(repo, "scheduler")); err != nil {
			return err
		}
		if err := writeAdapter(mod, minor); err != nil {
			return err
		}
		if err := run(mod, log, nil, env.goEnv, "go", "mod", "tidy"); err != nil {
			return err
		}
		return os.WriteFile(marker, nil, 0o644)
	}
	return writeAdapter(mod, minor)
}

func writeAdapter(mod string, minor Minor) error {
	files := []struct {
		path string
		data []byte
	}{
		{filepath.Join(mod, adapterDir, "adapter_test.go"), adapter},
		{filepath.Join(mod, adapterDir, "bench_test.go"), benchAdapter},
	}
	// scheduler_perf has the option itself from 1.38 on.
	has, err := declares(filepath.Join(mod, perfDir), registryOption)
	if err != nil {
		return err
	}
	optionFile := filepath.Join(mod, perfDir, "zz_dractl_option.go")
	if has {
		if err := os.Remove(optionFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	} else {
		files = append(files, struct {
			path string
			data []byte
		}{optionFile, perfOption})
	}
	for _, f := range files {
		data, err := forMinor(f.data, minor)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f.path), err)
		}
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f.path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// registryOption is the option of testdata/perf_option.go.
const registryOption = "func WithOutOfTreePluginRegistry("

// declares reports whether a Go file of upstream's in dir (not the one
// written here) holds decl.
func declares(dir, decl string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return false, err
	}
	for _, f := range files {
		if filepath.Base(f) == "zz_dractl_option.go" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		if bytes.Contains(data, []byte("\n"+decl)) {
			return true, nil
		}
	}
	return false, nil
}

// forMinor rewrites an adapter file's import of the test context package
// to the minor's; a file that names another path for it is an error, so
// that a moved package fails here and not in the build.
func forMinor(src []byte, minor Minor) ([]byte, error) {
	if minor.ktesting == "" || minor.ktesting == adapterKTesting {
		return src, nil
	}
	old := []byte(strconv.Quote(adapterKTesting))
	if !bytes.Contains(src, old) {
		if bytes.Contains(src, []byte("/ktesting\"")) {
			return nil, fmt.Errorf("imports a ktesting package other than %s", adapterKTesting)
		}
		return src, nil
	}
	return bytes.ReplaceAll(src, old, []byte(strconv.Quote(minor.ktesting))), nil
}

// copyPerf copies the package's non-test Go files and everything below
// dra/ except Go files: upstream's tests there are replaced by the
// adapter.
func copyPerf(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		inDRA := rel == "dra" || strings.HasPrefix(rel, "dra"+string(filepath.Separator))
		if d.IsDir() {
			if rel != "." && !inDRA {
				return fs.SkipDir
			}
			return nil
		}
		goFile := strings.HasSuffix(rel, ".go")
		topLevel := !strings.Contains(rel, string(filepath.Separator))
		if !(inDRA && !goFile || topLevel && goFile && !strings.HasSuffix(rel, "_test.go")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
}

// moduleDir downloads (or finds in the module cache) the upstream module.
func moduleDir(dir, module string, env []string, log io.Writer) (string, error) {
	var out strings.Builder
	if err := run(dir, log, &out, env, "go", "mod", "download", "-json", module); err != nil {
		return "", err
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out.String()), &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", module, info.Error)
	}
	return info.Dir, nil
}

func run(dir string, log, stdout io.Writer, env []string, args ...string) error {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Stderr = log
	cmd.Stdout = log
	if stdout != nil {
		cmd.Stdout = stdout
	}
	// The copy is a module of its own: the caller's workspace or vendor
	// settings must not apply to it.
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod"), env...)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s (in %s): %w", strings.Join(args, " "), dir, err)
	}
	return nil
}

// removeAll removes a tree whose files may be read-only copies.
func removeAll(dir string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// workload is an integration-test workload of a suite's configuration.
type workload struct{ suite, testCase, name string }

// expected lists the workloads scheduler_perf's integration test selects
// in every performance-config.yaml below dra.
func expected(dra string) ([]workload, error) {
	var all []workload
	err := eachConfig(dra, func(suite string, data []byte) error {
		ws, err := selectWorkloads(suite, data)
		all = append(all, ws...)
		return err
	})
	return all, err
}

// eachConfig calls f with every performance-config.yaml below dra and the
// suite it is; an error names the file.
func eachConfig(dra string, f func(suite string, data []byte) error) error {
	return filepath.WalkDir(dra, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "performance-config.yaml" {
			return err
		}
		rel, err := filepath.Rel(dra, filepath.Dir(path))
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := f(suiteName(filepath.ToSlash(rel)), data); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
}

// suiteName is how the adapter names the suite of a directory below dra.
func suiteName(rel string) string {
	if rel == "." {
		return "dra"
	}
	return strings.ReplaceAll(rel, "/", "-")
}

// selectWorkloads applies the label filter to a configuration's workloads
// as scheduler_perf does: a workload carries its test case's labels too.
func selectWorkloads(suite string, data []byte) ([]workload, error) {
	var cases []struct {
		Name      string
		Labels    []string
		Workloads []struct {
			Name   string
			Labels []string
		}
	}
	if err := yaml.Unmarshal(data, &cases); err != nil {
		return nil, err
	}
	var ws []workload
	for _, tc := range cases {
		for _, w := range tc.Workloads {
			if selected(append(slices.Clone(tc.Labels), w.Labels...)) {
				ws = append(ws, workload{suite, tc.Name, w.Name})
			}
		}
	}
	return ws, nil
}

func selected(labels []string) bool {
	for _, f := range labelFilter {
		must := !strings.HasPrefix(f, "-")
		if slices.Contains(labels, strings.TrimLeft(f, "+-")) != must {
			return false
		}
	}
	return true
}

// missing returns a failure for every workload and plugin that did not
// report.
func missing(cases []Case, want []workload) []Case {
	var out []Case
	for _, w := range want {
		for _, plugin := range []string{InTree, Dractl} {
			if !slices.ContainsFunc(cases, func(c Case) bool {
				return c.Suite == w.suite && c.Plugin == plugin && c.TestCase == w.testCase && c.Workload == w.name
			}) {
				out = append(out, Case{Suite: w.suite, Plugin: plugin, TestCase: w.testCase, Workload: w.name,
					Result: "fail", Message: "did not run"})
			}
		}
	}
	return out
}

var specialFilenameChars = regexp.MustCompile(`[^a-zA-Z0-9-_]`)

// logFile is where scheduler_perf keeps a failed workload's log.
func logFile(dir string, c Case) string {
	if c.Result != "fail" || c.Workload == "" {
		return ""
	}
	name := strings.Join([]string{"TestSchedulerPerf", c.Suite, c.Plugin, c.TestCase, c.Workload}, "/")
	path := filepath.Join(dir, specialFilenameChars.ReplaceAllString(name, "_")+".log")
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// logErr is an error in a klog line: err="..." with escaped quotes.
var logErr = regexp.MustCompile(`\berr="((?:[^"\\]|\\.)*)"`)

// MaxLogSize bounds a failed workload's log: a plugin that fails every
// cycle writes hundreds of MiB a minute, the same lines over and over.
const MaxLogSize = 64 << 20

// truncateLog cuts the log at path to MaxLogSize and reports whether it
// did.
func truncateLog(path string) bool {
	if path == "" {
		return false
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() <= MaxLogSize {
		return false
	}
	return os.Truncate(path, MaxLogSize) == nil
}

// repeatedError is how often an error must be in a workload's log to be
// reported: an error seen a few times (a namespace not there yet at start)
// is the noise of every run.
const repeatedError = 10

func repeated(msg string, n int) (string, int) {
	if n < repeatedError {
		return "", 0
	}
	return msg, n
}

// commonError returns the error most frequent in a log, and how often it
// is there; ties go to the one seen first.
func commonError(path string) (string, int) {
	if path == "" {
		return "", 0
	}
	f, err := os.Open(path)
	if err != nil {
		return "", 0
	}
	defer f.Close()
	count := map[string]int{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		for _, m := range logErr.FindAllSubmatch(sc.Bytes(), -1) {
			msg := strings.ReplaceAll(string(m[1]), `\"`, `"`)
			if count[msg] == 0 {
				order = append(order, msg)
			}
			count[msg]++
		}
	}
	best := ""
	for _, msg := range order {
		if count[msg] > count[best] {
			best = msg
		}
	}
	return best, count[best]
}

// event is one line of go test -json.
type event struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

const testName = "TestSchedulerPerf"

// maxMessageLines bounds a failure's message: a leak check lists every
// goroutine, and the first lines say what failed.
const maxMessageLines = 30

// parse reads go test -json output and returns the cases: the workloads
// (TestSchedulerPerf/<suite>/<plugin>/<test case>/<workload>) that passed
// or failed, skipped ones left out (the label filter), and the groups that
// failed without a failed workload below them. A workload that started
// and never ended failed (the test binary died or timed out inside it).
// ended is called with every case as soon as it is known, and may add to
// it.
func parse(r io.Reader, ended func(*Case)) ([]Case, error) {
	type test struct {
		out     []string
		started bool
		done    bool
	}
	tests := map[string]*test{}
	var order []string
	get := func(name string) *test {
		t, ok := tests[name]
		if !ok {
			t = &test{}
			tests[name] = t
			order = append(order, name)
		}
		return t
	}
	failedBelow := map[string]bool{}
	var cases []Case
	emit := func(c Case) {
		cases = append(cases, c)
		if ended != nil {
			ended(&cases[len(cases)-1])
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || !strings.HasPrefix(e.Test, testName+"/") {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(e.Test, testName+"/"), "/")
		t := get(e.Test)
		switch e.Action {
		case "run":
			t.started = true
		case "output":
			line := strings.TrimRight(e.Output, "\n")
			if trimmed := strings.TrimSpace(line); trimmed != "" && !strings.HasPrefix(trimmed, "=== ") && !strings.HasPrefix(trimmed, "--- ") {
				t.out = append(t.out, line)
			}
		case "skip":
			t.done = true
		case "pass", "fail":
			t.done = true
			c := caseOf(parts, e.Action, time.Duration(e.Elapsed*float64(time.Second)), t.out)
			if e.Action == "fail" {
				for p := e.Test; strings.Contains(p, "/"); {
					p = p[:strings.LastIndex(p, "/")]
					failedBelow[p] = true
				}
			}
			switch {
			case len(parts) == 4:
				emit(c)
			case e.Action == "fail" && !failedBelow[e.Test]:
				c.Workload = ""
				emit(c)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, name := range order {
		t := tests[name]
		parts := strings.Split(strings.TrimPrefix(name, testName+"/"), "/")
		if len(parts) == 4 && t.started && !t.done {
			out := append(slices.Clone(t.out), "did not end: the test binary exited or timed out while it ran")
			emit(caseOf(parts, "fail", 0, out))
		}
	}
	return cases, nil
}

// caseOf makes the case of a test below TestSchedulerPerf; parts are its
// path, a group's shorter than a workload's.
func caseOf(parts []string, result string, elapsed time.Duration, out []string) Case {
	at := func(i int) string {
		if i < len(parts) {
			return parts[i]
		}
		return ""
	}
	c := Case{Suite: at(0), Plugin: at(1), TestCase: at(2), Workload: at(3), Result: result, Elapsed: elapsed}
	if result == "fail" {
		c.Message = failureMessage(out)
	}
	return c
}

var (
	// logEntry starts a line a test logged (t.Log, t.Error): the test's
	// own output is indented by four spaces, continuation lines by more.
	logEntry = regexp.MustCompile(`^    \S+\.go:\d+: `)
	// errorEntry starts an error ktesting reported (tCtx.Errorf, Fatalf).
	errorEntry = regexp.MustCompile(`^    \S+\.go:\d+: (FATAL )?ERROR:`)
)

// failureMessage picks the errors out of a failed test's output: the
// workload's own log (apiserver, scheduler) is there too. Output without
// such an error (a panic, a leak check) is given by its last lines.
func failureMessage(out []string) string {
	var msg []string
	in := false
	for _, line := range out {
		switch {
		case errorEntry.MatchString(line):
			in = true
		case logEntry.MatchString(line):
			in = false
		}
		if in {
			msg = append(msg, strings.TrimSpace(line))
		}
	}
	if len(msg) == 0 {
		for _, line := range out[max(len(out)-maxMessageLines, 0):] {
			msg = append(msg, strings.TrimSpace(line))
		}
	}
	if len(msg) > maxMessageLines {
		msg = append(msg[:maxMessageLines:maxMessageLines], fmt.Sprintf("... %d more lines", len(msg)-maxMessageLines))
	}
	if len(msg) == 0 {
		return "failed without a message"
	}
	return strings.Join(msg, "\n")
}

// ErrFailed is returned by Check when a workload failed with dractl's
// plugin.
var ErrFailed = errors.New("a workload failed with dractl's plugin")

// Check returns ErrFailed unless every case of dractl's plugin passed.
func (r *Report) Check() error {
	if r.Count(Dractl, "fail") > 0 || r.Count(Dractl, "pass") == 0 {
		return ErrFailed
	}
	return nil
}
