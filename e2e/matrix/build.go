// Package matrix runs dractl's live verbs, its monitor and its driver
// against kube-apiserver processes of every Kubernetes minor that serves
// resource.k8s.io/v1 (1.34 and newer), each started on loopback with etcd
// and the DRA feature gates that minor has.
//
// The servers are built here, not downloaded: BuildAPIServer makes a
// scratch module that requires k8s.io/kubernetes at a release the Go module
// proxy serves, with each staging module pinned to its published version
// as kubernetes' own go.mod does with ./staging, and builds
// cmd/kube-apiserver from it into a binary named by its version. The test
// (matrix_test.go, build tag matrix: `make e2e-matrix`) reads them from
// bin/.
package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/version"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Releases are the kube-apiserver releases the matrix runs against, the
// newest patch of each minor the module proxy serves (`go list -m
// -versions k8s.io/kubernetes`). 1.34 is the first minor that serves
// resource.k8s.io/v1; 1.37 is the one dractl is built on.
// 1.38 is its newest pre-release, which needs Go 1.27 (Toolchain).
var Releases = []string{"v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2", "v1.38.0-beta.0"}

// EtcdPackage is etcd's main package; the version is the one the module
// graph of k8s.io/kubernetes selects, as scheduler_perf's harness builds it.
const EtcdPackage = "go.etcd.io/etcd/server/v3"

// APIServerBinary is where BuildAPIServer puts the server of release in bin.
func APIServerBinary(bin, release string) string {
	return filepath.Join(bin, "kube-apiserver-"+release)
}

// Minor is the minor of a release: 34 for v1.34.4.
func Minor(release string) (int, error) {
	var major, minor, patch int
	if _, err := fmt.Sscanf(release, "v%d.%d.%d", &major, &minor, &patch); err != nil || major != 1 {
		return 0, fmt.Errorf("expected a release such as v1.34.4, found %q", release)
	}
	return minor, nil
}

// Built reports whether binary is kube-apiserver of release: its
// --version says so.
func Built(binary, release string) bool {
	out, err := exec.Command(binary, "--version").Output()
	return err == nil && strings.TrimSpace(string(out)) == "Kubernetes "+release
}

// stagingReplace matches kubernetes' replace directives of its staging
// modules: "k8s.io/api => ./staging/src/k8s.io/api".
var stagingReplace = regexp.MustCompile(`(?m)^\s*(?:replace\s+)?(k8s\.io/[A-Za-z0-9._/-]+)\s+=>\s+\./staging/`)

// goDirective matches a go.mod's go line.
var goDirective = regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)

// ScratchModule returns the go.mod of a module that builds release's
// binaries: it requires k8s.io/kubernetes at release and replaces each
// staging module that kubernetes' go.mod (kubeGoMod) points at ./staging
// by its published version, v0.<minor>.<patch>.
func ScratchModule(kubeGoMod []byte, release string) (string, error) {
	minor, err := Minor(release)
	if err != nil {
		return "", err
	}
	staging := "v0" + strings.TrimPrefix(release, "v1")
	goLine := goDirective.FindSubmatch(kubeGoMod)
	if goLine == nil {
		return "", fmt.Errorf("k8s.io/kubernetes %s: go.mod has no go directive", release)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module kube-apiserver-1.%d\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\n", minor, goLine[1], release)
	mods := stagingReplace.FindAllSubmatch(kubeGoMod, -1)
	if len(mods) == 0 {
		return "", fmt.Errorf("k8s.io/kubernetes %s: go.mod replaces no staging module", release)
	}
	for _, m := range mods {
		fmt.Fprintf(&b, "replace %s => %s %s\n", m[1], m[1], staging)
	}
	return b.String(), nil
}

// BuildAPIServer builds kube-apiserver of release into bin (see
// APIServerBinary), stamped with its version as a release build is, unless
// a binary of that release is there already. The go command's output goes
// to log. It returns how long the build took (zero when cached).
// toolchain is the GOTOOLCHAIN for a release whose go.mod needs a newer
// Go than the machine's (the Makefile's GOTOOLCHAIN_138); asking for such
// a release without one is an error that says so.
func BuildAPIServer(ctx context.Context, bin, release, toolchain string, log io.Writer) (time.Duration, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return 0, err
	}
	out := APIServerBinary(bin, release)
	if Built(out, release) {
		return 0, nil
	}
	minor, err := Minor(release)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	work, err := os.MkdirTemp("", "kube-apiserver-build-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	// The module's own go.mod, from the module cache (downloaded if
	// need be).
	// The toolchain downloads too: a release that needs a newer Go is
	// refused by an older go command before its go.mod can be read.
	var dl bytes.Buffer
	if err := goCmd(ctx, work, &dl, log, toolchain, "mod", "download", "-json", "k8s.io/kubernetes@"+release); err != nil {
		return 0, fmt.Errorf("downloading k8s.io/kubernetes %s: %w: %s", release, err, strings.TrimSpace(dl.String()))
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(dl.Bytes(), &info); err != nil || info.GoMod == "" {
		return 0, fmt.Errorf("downloading k8s.io/kubernetes %s: %v %s", release, err, info.Error)
	}
	kubeGoMod, err := os.ReadFile(info.GoMod)
	if err != nil {
		return 0, err
	}
	gomod, err := ScratchModule(kubeGoMod, release)
	if err != nil {
		return 0, err
	}
	goVersion := string(goDirective.FindSubmatch(kubeGoMod)[1])
	if !NeedsNewerGo(goVersion, runtime.Version()) {
		toolchain = ""
	} else if toolchain == "" {
		return 0, fmt.Errorf("k8s.io/kubernetes %s needs Go %s, newer than this %s: give a toolchain (GOTOOLCHAIN, -toolchain)", release, goVersion, runtime.Version())
	}
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(gomod), 0o644); err != nil {
		return 0, err
	}
	pkg := "k8s.io/component-base/version"
	ldflags := fmt.Sprintf("-s -w -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=%[3]d -X %[1]s.gitTreeState=clean",
		pkg, release, minor)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return 0, err
	}
	// -mod=mod: the go command adds what go.sum lacks, from the proxy.
	if err := goCmd(ctx, work, log, log, toolchain, "build", "-mod=mod", "-trimpath", "-ldflags", ldflags, "-o", out, "k8s.io/kubernetes/cmd/kube-apiserver"); err != nil {
		return 0, fmt.Errorf("building kube-apiserver %s: %w", release, err)
	}
	if !Built(out, release) {
		return 0, fmt.Errorf("%s does not report %s", out, release)
	}
	return time.Since(start), nil
}

// BuildEtcd builds etcd into bin/etcd from module (a directory of a module
// whose graph has etcd's server, the e2e module), unless it is there.
func BuildEtcd(ctx context.Context, module, bin string, log io.Writer) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	out := filepath.Join(bin, "etcd")
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	return goCmd(ctx, module, log, log, "", "build", "-o", out, EtcdPackage)
}

// NeedsNewerGo reports whether a go.mod's go version is newer than the
// running Go's (runtime.Version, e.g. go1.26.8).
func NeedsNewerGo(goModVersion, running string) bool {
	return version.Compare("go"+goModVersion, running) > 0
}

// goCmd runs the go command with toolchain as GOTOOLCHAIN, or the
// machine's own when it is empty.
func goCmd(ctx context.Context, dir string, stdout, stderr io.Writer, toolchain string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	if toolchain == "" {
		toolchain = "local"
	}
	// The scratch module stands alone: no workspace.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN="+toolchain)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd.Run()
}
