// Package upstreamsuite runs the allocator test suite of
// k8s.io/dynamic-resource-allocation (structured/internal/allocatortesting,
// the cases upstream's maintainers run against each of their allocators)
// against dractl.
//
// The suite is in an internal package, so only code inside that module can
// call it. Run copies the module from the Go module cache into a temporary
// directory, adds testdata/adapter_test.go as structured/internal/dractl
// (a factory that hands the suite dractl's allocator with the case's
// feature gates), points the copy at this checkout of dractl, runs the test
// there and reports every case. Nothing of upstream's is kept in this
// repository.
package upstreamsuite

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Release is a release of k8s.io/dynamic-resource-allocation whose suite
// is run, with what dractl needs to build beside it.
type Release struct {
	// Minor is the Kubernetes minor of the release.
	Minor string
	// Module is the upstream module and version; the first release's must
	// be the version conformance/go.mod requires.
	Module string
	// Cases is how many cases the suite of the release has.
	Cases int
	// Tags are the build tags of dractl's packages for that minor's
	// modules (docs/versions.md).
	Tags string
	// NewerGo: the release needs a newer Go than the machine's
	// (Options.Toolchain).
	NewerGo bool
	// slices is the adapter's file for the slice type the suite hands
	// the allocator factory.
	slices []byte
}

// Releases are the releases the suite runs at, oldest first.
var Releases = []Release{
	{Minor: "1.37", Module: "k8s.io/dynamic-resource-allocation@v0.37.2", Cases: 283, slices: slicesV1},
	{Minor: "1.38", Module: "k8s.io/dynamic-resource-allocation@v0.38.0-beta.0", Cases: 322, Tags: "k8s138", NewerGo: true, slices: slicesDRAAPI},
}

// Module is the first release's module.
var Module = Releases[0].Module

// adapterDir is where the adapter goes inside the module copy.
const adapterDir = "structured/internal/dractl"

var (
	//go:embed testdata/adapter_test.go
	adapter []byte
	//go:embed testdata/slices_v1_test.go
	slicesV1 []byte
	//go:embed testdata/slices_draapi_test.go
	slicesDRAAPI []byte
)

// Options configure Run.
type Options struct {
	// Repo is the root of the dractl checkout to test.
	Repo string
	// Release is the suite's release; the zero value is Releases[0].
	Release Release
	// Toolchain is the GOTOOLCHAIN of a release that needs a newer Go
	// than the machine's (the Makefile's GOTOOLCHAIN_138).
	Toolchain string
	// Work is the directory the module is copied into; empty means a new
	// temporary directory, removed afterwards. A Work directory that holds
	// a prepared copy already is reused: only the adapter is rewritten.
	Work string
	// Log receives the go commands' own output (downloads, build errors).
	Log io.Writer
	// Count runs every case this many times (go test -count); a case
	// passes when every run passes, and its Dractl time is the smallest,
	// which filters out the noise of a shared machine.
	Count int
}

// Case is the outcome of one suite case.
type Case struct {
	Name   string // subtest path below TestAllocator
	Result string // "pass", "fail" or "skip"
	// Elapsed is the test's own wall time as go test reports it (the
	// largest of the runs).
	Elapsed time.Duration
	// Dractl is the time from building the allocator to the end of
	// Allocate, as the adapter measured it, the smallest of the runs; zero
	// for cases that do not allocate through the factory.
	Dractl time.Duration
	// First is the first run's time, which includes compiling the case's
	// CEL expressions (later runs find them in the process-wide cache, as
	// kube-scheduler's later cycles do).
	First time.Duration
	// Runs is how many times the case ran.
	Runs int
	// Output is the test's output, kept for failures.
	Output string
}

// Report is every case of one run.
type Report struct {
	Cases []Case
}

// Count returns the number of cases with the result.
func (r *Report) Count(result string) int {
	n := 0
	for _, c := range r.Cases {
		if c.Result == result {
			n++
		}
	}
	return n
}

// Slowest returns the case with the largest time by.
func (r *Report) Slowest(by func(Case) time.Duration) Case {
	var worst Case
	for _, c := range r.Cases {
		if by(c) > by(worst) {
			worst = c
		}
	}
	return worst
}

// Run prepares the module copy and runs the suite in it.
func Run(opts Options) (*Report, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	rel := opts.Release
	if rel.Module == "" {
		rel = Releases[0]
	}
	var env []string
	if rel.NewerGo {
		if opts.Toolchain == "" {
			return nil, fmt.Errorf("%s needs a newer Go than this one: set Options.Toolchain (GOTOOLCHAIN)", rel.Module)
		}
		env = []string{"GOTOOLCHAIN=" + opts.Toolchain}
	}
	src, err := moduleDir(opts.Repo, rel.Module, env, opts.Log)
	if err != nil {
		return nil, err
	}
	work := opts.Work
	if work == "" {
		if work, err = os.MkdirTemp("", "upstreamsuite-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
	}
	mod := filepath.Join(work, "module-"+rel.Minor)
	marker := filepath.Join(work, "prepared-"+rel.Minor)
	_, err = os.Stat(marker)
	prepared := err == nil
	if !prepared {
		if err := os.CopyFS(mod, os.DirFS(src)); err != nil {
			return nil, fmt.Errorf("copying %s: %w", src, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(mod, adapterDir), 0o755); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{"adapter_test.go": adapter, "slices_test.go": rel.slices} {
		if err := os.WriteFile(filepath.Join(mod, adapterDir, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	repo, err := filepath.Abs(opts.Repo)
	if err != nil {
		return nil, err
	}
	steps := [][]string{
		{"go", "mod", "edit", "-require=github.com/dractl/dractl@v0.0.0-00010101000000-000000000000", "-replace=github.com/dractl/dractl=" + repo},
		{"go", "mod", "tidy"},
	}
	for _, s := range steps {
		if prepared {
			break
		}
		if err := run(mod, opts.Log, nil, env, s...); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	// A failing case makes go test exit non-zero; the report says which.
	count := max(opts.Count, 1)
	testErr := run(mod, opts.Log, &out, env, "go", "test", "-json", "-count="+strconv.Itoa(count), "-tags="+rel.Tags, "-run", "^TestAllocator$", "./"+adapterDir)
	rep, err := parse(&out)
	if err != nil {
		return nil, err
	}
	if len(rep.Cases) == 0 {
		return nil, fmt.Errorf("no suite case ran: %v", testErr)
	}
	return rep, nil
}

// moduleDir downloads (or finds in the module cache) the upstream module.
func moduleDir(repo, module string, env []string, log io.Writer) (string, error) {
	var out bytes.Buffer
	if err := run(filepath.Join(repo, "conformance"), log, &out, env, "go", "mod", "download", "-json", module); err != nil {
		return "", err
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", module, info.Error)
	}
	return info.Dir, nil
}

func run(dir string, log io.Writer, stdout io.Writer, env []string, args ...string) error {
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

var elapsedRE = regexp.MustCompile(`DRACTL_ELAPSED_NS=(\d+)`)

// event is one line of go test -json.
type event struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

// parse reads go test -json output. Cases are the leaf subtests of
// TestAllocator (a test with subtests is a group, not a case).
func parse(r io.Reader) (*Report, error) {
	type acc struct {
		Case
		out    strings.Builder
		parent bool
		done   bool
		cur    time.Duration // this run's time
	}
	tests := map[string]*acc{}
	var order []string
	get := func(name string) *acc {
		a, ok := tests[name]
		if !ok {
			a = &acc{Case: Case{Name: name}}
			tests[name] = a
			order = append(order, name)
		}
		return a
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || !strings.HasPrefix(e.Test, "TestAllocator/") {
			continue
		}
		name := strings.TrimPrefix(e.Test, "TestAllocator/")
		a := get(name)
		for p := name; strings.Contains(p, "/"); {
			p = p[:strings.LastIndex(p, "/")]
			get(p).parent = true
		}
		switch e.Action {
		case "run":
			a.Runs++
			a.cur = 0
		case "output":
			a.out.WriteString(e.Output)
			if m := elapsedRE.FindStringSubmatch(e.Output); m != nil {
				ns, _ := strconv.ParseInt(m[1], 10, 64)
				a.cur = max(a.cur, time.Duration(ns))
			}
		case "pass", "fail", "skip":
			if a.Result != "fail" {
				a.Result = e.Action
			}
			a.done = true
			a.Elapsed = max(a.Elapsed, time.Duration(e.Elapsed*float64(time.Second)))
			if a.cur > 0 && (a.Dractl == 0 || a.cur < a.Dractl) {
				a.Dractl = a.cur
			}
			if a.Runs == 1 {
				a.First = a.cur
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	rep := &Report{}
	for _, name := range order {
		a := tests[name]
		if a.parent {
			continue
		}
		if !a.done {
			a.Result = "fail" // the test binary died or timed out inside it
		}
		if a.Result == "fail" {
			a.Output = a.out.String()
		}
		rep.Cases = append(rep.Cases, a.Case)
	}
	slices.SortFunc(rep.Cases, func(x, y Case) int { return strings.Compare(x.Name, y.Name) })
	return rep, nil
}
