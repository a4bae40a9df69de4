package mockgpu_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	at "github.com/dractl/dractl/pkg/allocator/allocatortest"
	"github.com/dractl/dractl/pkg/driverkit"
	"github.com/dractl/dractl/pkg/mig"
	"github.com/dractl/dractl/pkg/mockgpu"
)

// The crash tests run the driver as a child process — this test binary
// re-executed into childMain, which is mockgpu.Run, what the
// dractl-gpu-driver binary runs, with the claims of a fake clientset in
// place of an API server — and SIGKILL it at each failpoint.
const childEnv = "MOCKGPU_CRASH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		childMain()
		return
	}
	os.Exit(m.Run())
}

type childConfig struct {
	mockgpu.Config
	Claims []resourcev1.ResourceClaim
}

func childMain() {
	var cfg childConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName, UID: "node-uid"}}}
	for i := range cfg.Claims {
		objs = append(objs, &cfg.Claims[i])
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := mockgpu.Run(ctx, cfg.Config, fake.NewClientset(objs...)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// node is the directories of one simulated node; the driver process comes
// and goes, they stay.
type node struct {
	t                      *testing.T
	cfg                    childConfig
	child                  *exec.Cmd
	exited                 chan struct{}
	exitErr                error
	conn                   *grpc.ClientConn
	dra                    drapbv1.DRAPluginClient
	stateDir, registrarDir string
}

func newNode(t *testing.T, claims ...*resourcev1.ResourceClaim) *node {
	short, err := os.MkdirTemp("", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	n := &node{t: t, stateDir: filepath.Join(short, "state"), registrarDir: filepath.Join(short, "reg")}
	for _, d := range []string{n.registrarDir, filepath.Join(short, "plugin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.cfg.Config = mockgpu.Config{
		DriverName: mockgpu.DriverName, NodeName: "node-1", Model: "a100", GPUs: 2,
		StateDir: n.stateDir, CDIDir: filepath.Join(short, "cdi"), RegistrarDir: n.registrarDir, PluginDir: filepath.Join(short, "plugin"),
	}
	for _, c := range claims {
		n.cfg.Claims = append(n.cfg.Claims, *c)
	}
	t.Cleanup(n.stop)
	return n
}

// start runs the driver, killing itself at failpoint (if not empty), and
// waits until it serves.
func (n *node) start(failpoint driverkit.Failpoint) {
	n.t.Helper()
	cfg := n.cfg
	cfg.Failpoint = string(failpoint)
	data, err := json.Marshal(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	sock := filepath.Join(n.cfg.PluginDir, "dra.sock")
	reg := filepath.Join(n.registrarDir, mockgpu.DriverName+"-reg.sock")
	// A killed driver leaves its sockets behind; the new one replaces
	// them, and until it has, they must not count as served.
	for _, f := range []string{sock, reg} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			n.t.Fatal(err)
		}
	}
	n.child = exec.Command(os.Args[0], "-test.run=^$")
	n.child.Env = append(os.Environ(), childEnv+"="+string(data))
	n.child.Stderr = &prefixWriter{t: n.t}
	if err := n.child.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.exited = make(chan struct{})
	go func(c *exec.Cmd, ch chan struct{}) { n.exitErr = c.Wait(); close(ch) }(n.child, n.exited)
	// Generous: the child is this test binary, often built with the race
	// detector and started on a loaded machine; the poll costs nothing
	// when it is fast.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, e1 := os.Stat(sock)
		_, e2 := os.Stat(reg)
		if e1 == nil && e2 == nil {
			break
		}
		select {
		case <-n.exited:
			n.child = nil
			n.t.Fatalf("driver exited before serving: %v", n.exitErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.t.Fatal("driver did not start serving")
		}
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatal(err)
	}
	n.conn, n.dra = conn, drapbv1.NewDRAPluginClient(conn)
}

// killed waits for the driver to die of SIGKILL.
func (n *node) killed() {
	n.t.Helper()
	select {
	case <-n.exited:
		n.child = nil
		var ee *exec.ExitError
		if !errors.As(n.exitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			n.t.Fatalf("driver ended with %v, want SIGKILL at the failpoint", n.exitErr)
		}
	case <-time.After(2 * time.Minute):
		n.t.Fatal("driver did not hit its failpoint")
	}
	n.closeConn()
}

// closeConn closes the client connection of the last start, if it got
// that far: a start that failed leaves none.
func (n *node) closeConn() {
	if n.conn != nil {
		n.conn.Close()
		n.conn, n.dra = nil, nil
	}
}

func (n *node) stop() {
	if n.child == nil {
		return
	}
	_ = n.child.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		_ = n.child.Process.Kill()
		<-n.exited
	}
	n.closeConn()
	n.child = nil
}

func (n *node) prepare(c *resourcev1.ResourceClaim) (*drapbv1.NodePrepareResourceResponse, error) {
	resp, err := n.dra.NodePrepareResources(context.Background(), &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}}})
	if err != nil {
		return nil, err
	}
	return resp.Claims[string(c.UID)], nil
}

func (n *node) unprepare(c *resourcev1.ResourceClaim) error {
	resp, err := n.dra.NodeUnprepareResources(context.Background(), &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}}})
	if err != nil {
		return err
	}
	if msg := resp.Claims[string(c.UID)].Error; msg != "" {
		return errors.New(msg)
	}
	return nil
}

// state is what is on the node, read from its directories, not from the
// driver: MIG devices as "device@claim", CDI specs and checkpoints.
func (n *node) state() (partitions, specs, checkpoints []string) {
	n.t.Helper()
	gpus, err := mockgpu.New(n.cfg.DriverName, n.cfg.NodeName, n.cfg.Model, n.cfg.GPUs, filepath.Join(n.stateDir, "gpus"))
	if err != nil {
		n.t.Fatal(err)
	}
	ps, err := gpus.Partitions(context.Background())
	if err != nil {
		n.t.Fatal(err)
	}
	for _, p := range ps {
		partitions = append(partitions, p.Device+"@"+string(p.Claim))
	}
	sort.Strings(partitions)
	list := func(dir string) []string {
		entries, _ := os.ReadDir(dir)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	return partitions, list(n.cfg.CDIDir), list(filepath.Join(n.stateDir, "claims"))
}

func gpuClaim(name string, devices ...string) *resourcev1.ResourceClaim {
	var rs []resourcev1.DeviceRequestAllocationResult
	for i, d := range devices {
		rs = append(rs, at.Result(fmt.Sprintf("r%d", i), mockgpu.DriverName, "node-1", d))
	}
	return at.Claim(name).Allocated(rs...).Obj()
}

// TestCrashDuringPrepare kills the driver after each step of preparing a
// claim with two MIG devices, restarts it and lets the kubelet retry: the
// answer is the one an uninterrupted prepare gives, exactly one MIG device
// per allocated device exists, and nothing of the interrupted attempt is
// left over for a second claim to trip on.
func TestCrashDuringPrepare(t *testing.T) {
	a := gpuClaim("a", mig.MIGDeviceName(0, "3g.20gb", 0), mig.MIGDeviceName(1, "1g.5gb", 6))
	b := gpuClaim("b", mig.MIGDeviceName(0, "3g.20gb", 4))

	// The answer of an uninterrupted prepare, on a node of its own.
	ref := newNode(t, a)
	ref.start("")
	want, err := ref.prepare(a)
	if err != nil || want.Error != "" {
		t.Fatalf("reference prepare: %v %v", want, err)
	}
	ref.stop()

	for _, fp := range driverkit.PrepareFailpoints {
		t.Run(string(fp), func(t *testing.T) {
			n := newNode(t, a, b)
			n.start(fp)
			if _, err := n.prepare(a); err == nil {
				t.Fatal("prepare answered although the driver was killed before answering")
			}
			n.killed()

			n.start("")
			got, err := n.prepare(a)
			if err != nil || got.String() != want.String() {
				t.Fatalf("retried prepare: %v, %v; want %v", got, err, want)
			}
			gotB, err := n.prepare(b)
			if err != nil || gotB.Error != "" {
				t.Fatalf("prepare b: %v %v", gotB, err)
			}
			parts, specs, ckpts := n.state()
			wantParts := []string{mig.MIGDeviceName(0, "3g.20gb", 0) + "@uid-a", mig.MIGDeviceName(0, "3g.20gb", 4) + "@uid-b", mig.MIGDeviceName(1, "1g.5gb", 6) + "@uid-a"}
			if !slices.Equal(parts, wantParts) || len(specs) != 2 || !slices.Equal(ckpts, []string{"uid-a.json", "uid-b.json"}) {
				t.Fatalf("node state: partitions %v, CDI specs %v, checkpoints %v", parts, specs, ckpts)
			}
			if err := n.unprepare(a); err != nil {
				t.Fatal(err)
			}
			if parts, _, _ := n.state(); !slices.Equal(parts, wantParts[1:2]) {
				t.Fatalf("after unprepare of a: %v", parts)
			}
		})
	}
}

// TestCrashDuringUnprepare kills the driver after each step of
// unpreparing, restarts it and lets the kubelet retry: the claim ends
// unprepared, nothing leaks, and its devices can be prepared for another
// claim.
func TestCrashDuringUnprepare(t *testing.T) {
	a := gpuClaim("a", mig.MIGDeviceName(0, "2g.10gb", 0), mig.MIGDeviceName(0, "1g.5gb", 2))
	next := gpuClaim("next", mig.MIGDeviceName(0, "4g.20gb", 0))
	for _, fp := range driverkit.UnprepareFailpoints {
		t.Run(string(fp), func(t *testing.T) {
			n := newNode(t, a, next)
			n.start("")
			if r, err := n.prepare(a); err != nil || r.Error != "" {
				t.Fatalf("prepare: %v %v", r, err)
			}
			n.stop()
			n.start(fp)
			if err := n.unprepare(a); err == nil {
				t.Fatal("unprepare answered although the driver was killed before answering")
			}
			n.killed()

			n.start("")
			if err := n.unprepare(a); err != nil {
				t.Fatal(err)
			}
			if parts, specs, ckpts := n.state(); len(parts)+len(specs)+len(ckpts) != 0 {
				t.Fatalf("left behind: partitions %v, CDI specs %v, checkpoints %v", parts, specs, ckpts)
			}
			if r, err := n.prepare(next); err != nil || r.Error != "" {
				t.Fatalf("prepare over the freed memory slices: %v %v", r, err)
			}
		})
	}
}

// prefixWriter sends the child's log to the test log.
type prefixWriter struct{ t *testing.T }

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.t.Logf("driver: %s", p)
	return len(p), nil
}
