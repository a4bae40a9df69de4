package framework

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/dractl/dractl/internal/ociimage"
)

// The programs a Node runs, and where they come from. containerd is built
// from the Go module proxy as its own module graph (go install
// pkg@version), once per machine, into bin/node/containerd-<version> of
// the repository; the kubelet is built from this module (its go.mod
// names it as a tool, so its dependencies are the ones kube-apiserver is
// built with here), once per test binary, into bin/node. runc is Debian's
// (apt-get install runc: make e2e installs it).
const (
	ContainerdVersion = "v2.4.2"
	containerdModule  = "github.com/containerd/containerd/v2"
	kubeletPackage    = "k8s.io/kubernetes/cmd/kubelet"
)

// The images every node has: the pod sandbox's (kubernetes' own pause,
// build/pause/linux/pause.c of the module cache, compiled static) and a
// workload image of Debian's busybox-static, both built from files on
// this machine and imported, never pulled: the kubelet's pull policy for
// a tag other than latest is IfNotPresent, and a pull would fail here.
const (
	PauseImage   = "e2e.dractl.dev/pause:local"
	BusyboxImage = "e2e.dractl.dev/busybox:local"
)

// nodeTools are the paths of what a Node runs; found or built once per
// test binary.
type nodeTools struct {
	containerd, shim, ctr string
	kubelet, runc         string
	// images are OCI layout tarballs of PauseImage and BusyboxImage.
	images []string
}

var (
	toolsOnce sync.Once
	tools     nodeTools
	toolsErr  error
)

func findNodeTools() (*nodeTools, error) {
	toolsOnce.Do(func() { toolsErr = tools.find() })
	return &tools, toolsErr
}

func (nt *nodeTools) find() error {
	for _, c := range []struct{ cmd, pkg string }{{"ip", "iproute2"}, {"unshare", "util-linux"}, {"nsenter", "util-linux"}, {"gcc", "gcc"}} {
		if _, err := exec.LookPath(c.cmd); err != nil {
			return fmt.Errorf("a real node needs %s (apt-get install %s): %w", c.cmd, c.pkg, err)
		}
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return fmt.Errorf("a real node needs Debian's runc (apt-get install runc; make e2e installs it): %w", err)
	}
	nt.runc = runc
	mod, err := e2eModule()
	if err != nil {
		return err
	}
	bin := filepath.Join(filepath.Dir(mod), "bin", "node")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	// The test binaries of go test ./... run at once: one builds, the
	// others wait and find the result.
	lock, err := os.OpenFile(filepath.Join(bin, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("flock %s: %w", lock.Name(), err)
	}
	if err := nt.buildContainerd(filepath.Join(bin, "containerd-"+ContainerdVersion)); err != nil {
		return err
	}
	nt.kubelet = filepath.Join(bin, "kubelet")
	if err := goCommand(mod, nil, "build", "-o", nt.kubelet, kubeletPackage); err != nil {
		return err
	}
	images := filepath.Join(bin, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		return err
	}
	pause, err := pauseImage(mod, images)
	if err != nil {
		return fmt.Errorf("the pause image: %w", err)
	}
	busybox, err := busyboxImage(images)
	if err != nil {
		return fmt.Errorf("the busybox image: %w", err)
	}
	nt.images = []string{pause, busybox}
	return nil
}

// e2eModule is the directory of this module's go.mod.
func e2eModule() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if filepath.Base(filepath.Dir(mod)) != "e2e" {
		return "", fmt.Errorf("the tests run in module %s, not the e2e module", mod)
	}
	return filepath.Dir(mod), nil
}

func goCommand(dir string, env []string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// buildContainerd installs containerd, its runc shim and ctr into dir
// unless they are there: without cgo, and without the btrfs snapshotter,
// whose cgo headers Debian does not install by default.
func (nt *nodeTools) buildContainerd(dir string) error {
	nt.containerd, nt.shim, nt.ctr = filepath.Join(dir, "containerd"), filepath.Join(dir, "containerd-shim-runc-v2"), filepath.Join(dir, "ctr")
	if exists(nt.containerd, nt.shim, nt.ctr) {
		return nil
	}
	var pkgs []string
	for _, c := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		pkgs = append(pkgs, containerdModule+"/cmd/"+c+"@"+ContainerdVersion)
	}
	// Outside any module, so that containerd's own go.mod decides its
	// dependencies.
	return goCommand(os.TempDir(), []string{"GOBIN=" + dir, "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS="},
		append([]string{"install", "-tags", "no_btrfs"}, pkgs...)...)
}

func exists(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// pauseImage compiles kubernetes' pause from the module cache, statically
// (the image has no C library), and writes its image.
func pauseImage(mod, dir string) (string, error) {
	out, err := exec.Command("go", "-C", mod, "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		return "", fmt.Errorf("locating k8s.io/kubernetes in the module cache: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "build", "pause", "linux", "pause.c")
	bin := filepath.Join(dir, fmt.Sprintf(".pause.%d", os.Getpid()))
	defer os.Remove(bin)
	if out, err := exec.Command("gcc", "-Os", "-static", "-DVERSION=e2e", "-o", bin, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc -static %s (Debian's libc6-dev has the static C library): %v\n%s", src, err, out)
	}
	img, err := ociimage.Build(ociimage.Spec{Files: []ociimage.File{{Path: "/pause", Source: bin, Mode: 0o755}}, Entrypoint: []string{"/pause"}})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "pause.tar")
	return path, ociimage.WriteFile(path, PauseImage, img)
}

// busyboxImage is Debian's static busybox with a link for each of its
// applets, where busybox itself would install them.
func busyboxImage(dir string) (string, error) {
	const busybox = "/bin/busybox"
	f, err := elf.Open(busybox)
	if err != nil {
		return "", fmt.Errorf("%s (apt-get install busybox-static; make e2e installs it): %w", busybox, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New(busybox + " is dynamically linked: the image has no C library (apt-get install busybox-static replaces it)")
		}
	}
	out, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return "", fmt.Errorf("%s --list-full: %w", busybox, err)
	}
	files := []ociimage.File{{Path: busybox, Source: busybox, Mode: 0o755}, {Path: "/tmp", Mode: os.ModeDir | os.ModeSticky | 0o777}}
	for _, applet := range strings.Fields(string(out)) {
		if p := "/" + applet; p != busybox {
			files = append(files, ociimage.File{Path: p, Link: busybox})
		}
	}
	img, err := ociimage.Build(ociimage.Spec{Files: files, Cmd: []string{"sh"}, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "busybox.tar")
	return path, ociimage.WriteFile(path, BusyboxImage, img)
}
