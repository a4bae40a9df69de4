package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/internal/cli"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/live"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// repo is the dractl repository root, for the examples and deploy/.
const repo = ".."

// result is one dractl run.
type result struct {
	out, err string
	code     int
}

// dractl runs a command line in-process against kubeconfig.
func dractl(t testing.TB, kubeconfig string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig)
	}
	code := cli.Run(args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return result{out: out.String(), err: errb.String(), code: code}
}

// golden compares got with testdata/NAME.golden (testdata/NAME when NAME
// has an extension, such as .svg, so that the file shows as what it is),
// or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if filepath.Ext(name) != "" {
		path = filepath.Join("testdata", name)
	}
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

var serverAddress = regexp.MustCompile(`https://127\.0\.0\.1:\d+`)

// normalize replaces what changes from run to run: the random suffix of
// generated names (resourceclaim controller) and the API server's port.
func normalize(s string, generated ...string) string {
	for _, g := range generated {
		s = regexp.MustCompile(regexp.QuoteMeta(g)+`-[a-z0-9]{5}\b`).ReplaceAllString(s, g+"-XXXXX")
	}
	return serverAddress.ReplaceAllString(s, "https://127.0.0.1:PORT")
}

// publish creates the objects of example directories through the API, as
// a driver and a user would: ResourceSlices flattened (kube-apiserver does
// not know mixins), then Nodes, DeviceClasses and ResourceClaims.
func publish(t testing.TB, cp *framework.ControlPlane, dirs ...string) {
	t.Helper()
	var paths []string
	for _, d := range dirs {
		paths = append(paths, filepath.Join(repo, "examples", d))
	}
	objs, err := decode.Paths(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := decode.Group(objs)
	ctx := cp.Context()
	for _, n := range set.Nodes {
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range set.Slices {
		v1, err := api.ToUpstream(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Client.ResourceV1().ResourceSlices().Create(ctx, v1, metav1.CreateOptions{}); err != nil {
			t.Fatalf("ResourceSlice %s: %v", s.Name, err)
		}
	}
	for _, c := range set.Classes {
		if _, err := cp.Client.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range set.Claims {
		if _, err := cp.Client.ResourceV1().ResourceClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// allocate does what kube-scheduler does for a claim: picks devices on
// node (through the same State and allocator as dractl) and writes
// status.allocation, reserved for pod when given.
func allocate(t testing.TB, cp *framework.ControlPlane, namespace, name, node string, pod *corev1.Pod) *resourcev1.ResourceClaim {
	t.Helper()
	return allocateWith(t, cp.Context(), cp.Config, cp.Client, namespace, name, node, pod)
}

// allocateWith is allocate against any API server: its administrator's
// configuration and clientset.
func allocateWith(t testing.TB, ctx context.Context, cfg *rest.Config, client kubernetes.Interface, namespace, name, node string, pod *corev1.Pod) *resourcev1.ResourceClaim {
	t.Helper()
	c, err := live.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := c.Read(ctx, live.KindSlices|live.KindClasses|live.KindClaims)
	if err != nil {
		t.Fatal(err)
	}
	st, err := objs.State()
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot()
	claim, ok := snap.Claim(state.ClaimKey{Namespace: namespace, Name: name})
	if !ok {
		t.Fatalf("no claim %s/%s", namespace, name)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := snap.Cycle([]*resourcev1.ResourceClaim{claim}, state.CycleOptions{}).Allocate(ctx, n)
	if err != nil {
		t.Fatalf("allocating %s/%s on %s: %v", namespace, name, node, err)
	}
	claim = claim.DeepCopy()
	claim.Status.Allocation = res[0]
	if pod != nil {
		claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	}
	claim, err = client.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return claim
}

// eventually polls cond until it holds; cond's last error explains a
// timeout.
func eventually(t testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}

// dractlContext is dractl for verbs that run until ctx ends.
func dractlContext(ctx context.Context, kubeconfig string, args ...string) result {
	var out, errb syncBuffer
	args = append(args, "--kubeconfig", kubeconfig)
	code := cli.RunAs(ctx, "dractl", args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return result{out: out.String(), err: errb.String(), code: code}
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// terminate asks a child process to stop with sig, kills it if it has not
// exited (done closed) within grace, and reports whether it stopped by
// itself.
func terminate(p *os.Process, done <-chan struct{}, sig os.Signal, grace time.Duration) bool {
	_ = p.Signal(sig)
	select {
	case <-done:
		return true
	case <-time.After(grace):
		_ = p.Kill()
		<-done
		return false
	}
}

// treeBinary is a command of this tree, built on first use once per run of
// the tests into a temporary directory that TestMain removes.
type treeBinary struct {
	// name is the executable's; module the module's directory below the
	// repository ("" for the root); pkg the package within it.
	name, module, pkg string

	once      sync.Once
	tmp, path string
	err       error
}

var (
	driverBinary    = &treeBinary{name: "dractl-gpu-driver", pkg: "./cmd/dractl-gpu-driver"}
	publisherBinary = &treeBinary{name: "dractl-pool-publisher", pkg: "./cmd/dractl-pool-publisher"}
	schedulerBuild  = &treeBinary{name: "dractl-scheduler", module: "scheduler", pkg: "."}
)

func (b *treeBinary) build(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		if b.tmp, b.err = os.MkdirTemp("", b.name); b.err != nil {
			return
		}
		b.path = filepath.Join(b.tmp, b.name)
		build := exec.Command("go", "build", "-o", b.path, b.pkg)
		build.Dir = filepath.Join(repo, b.module)
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", b.name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
