// Package drivertest builds what the driver side's tests run: a node's
// prepare kit over a Profile (NewKit), the allocated claims it prepares
// (Claim), and a node driver run as a child process for crash
// tests: the test binary re-executes itself with the driver's
// configuration in an environment variable (the test's TestMain turns
// such a child into the driver), serves the kubelet's DRA gRPC API on a
// socket, and can be killed at a failpoint and started again over the
// same directories, as a node's driver is.
package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dractl/dractl/internal/testing/fakeapi"
)

// Child is what a child driver process is given: the driver's own
// configuration, and the objects of the API server it reads (a fake
// clientset's): its Node and the claims it will be asked to prepare.
type Child[C any] struct {
	Driver C
	Node   string
	Claims []resourcev1.ResourceClaim
}

// Main is the TestMain of a package whose tests start drivers with Proc:
// in a child (env set), it decodes the Child configuration and runs the
// driver with run until SIGTERM, then exits; otherwise it runs the tests.
func Main[C any](m *testing.M, env string, run func(context.Context, C, kubernetes.Interface) error) {
	data := os.Getenv(env)
	if data == "" {
		os.Exit(m.Run())
	}
	var cfg Child[C]
	if err := json.Unmarshal([]byte(data), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cfg.Node, UID: "node-uid"}}}
	for i := range cfg.Claims {
		objs = append(objs, &cfg.Claims[i])
	}
	client := fakeapi.NewClientset(fakeapi.Default, objs...)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	err := run(ctx, cfg.Driver, client)
	stop()
	client.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Proc is one node's driver process, which comes and goes.
type Proc struct {
	t testing.TB
	// Env is the environment variable the child reads its configuration
	// from; its presence makes the test binary the driver.
	Env string
	// Sockets are where the started driver serves: the DRA plugin
	// socket and the registration socket.
	Sockets []string

	child   *exec.Cmd
	exited  chan struct{}
	exitErr error
	conn    *grpc.ClientConn
	dra     drapbv1.DRAPluginClient
}

// NewProc returns the driver of a node whose plugin serves in pluginDir and
// registers in registrarDir as driver; it is stopped when the test ends.
func NewProc(t testing.TB, env, driver, pluginDir, registrarDir string) *Proc {
	p := &Proc{t: t, Env: env, Sockets: []string{filepath.Join(pluginDir, "dra.sock"), filepath.Join(registrarDir, driver+"-reg.sock")}}
	t.Cleanup(p.Stop)
	return p
}

// Start runs the driver with config (marshalled to JSON for the child)
// and waits until it serves.
func (p *Proc) Start(config any) {
	p.t.Helper()
	data, err := json.Marshal(config)
	if err != nil {
		p.t.Fatal(err)
	}
	// A killed driver leaves its sockets behind; the new one replaces
	// them, and until it has, they must not count as served.
	for _, f := range p.Sockets {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			p.t.Fatal(err)
		}
	}
	p.child = exec.Command(os.Args[0], "-test.run=^$")
	p.child.Env = append(os.Environ(), p.Env+"="+string(data))
	p.child.Stderr = logWriter{p.t}
	if err := p.child.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.exited = make(chan struct{})
	go func(c *exec.Cmd, ch chan struct{}) { p.exitErr = c.Wait(); close(ch) }(p.child, p.exited)
	// Generous: the child is this test binary, often built with the race
	// detector and started on a loaded machine; the poll costs nothing
	// when it is fast.
	deadline := time.Now().Add(2 * time.Minute)
	for !p.serving() {
		select {
		case <-p.exited:
			p.child = nil
			p.t.Fatalf("driver exited before serving: %v", p.exitErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatal("driver did not start serving")
		}
	}
	conn, err := grpc.NewClient("unix://"+p.Sockets[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.t.Fatal(err)
	}
	p.conn, p.dra = conn, drapbv1.NewDRAPluginClient(conn)
}

func (p *Proc) serving() bool {
	for _, f := range p.Sockets {
		if _, err := os.Stat(f); err != nil {
			return false
		}
	}
	return true
}

// Killed waits for the driver to die of SIGKILL at its failpoint.
func (p *Proc) Killed() {
	p.t.Helper()
	select {
	case <-p.exited:
		p.child = nil
		var ee *exec.ExitError
		if !errors.As(p.exitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			p.t.Fatalf("driver ended with %v, want SIGKILL at the failpoint", p.exitErr)
		}
	case <-time.After(2 * time.Minute):
		p.t.Fatal("driver did not hit its failpoint")
	}
	p.closeConn()
}

// closeConn closes the client connection of the last start, if it got
// that far: a start that failed leaves none.
func (p *Proc) closeConn() {
	if p.conn != nil {
		p.conn.Close()
		p.conn, p.dra = nil, nil
	}
}

// Stop ends the driver as the kubelet's node would, with SIGTERM, and
// kills it if it does not stop in time.
func (p *Proc) Stop() {
	if p.child == nil {
		return
	}
	_ = p.child.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.child.Process.Kill()
		<-p.exited
	}
	p.closeConn()
	p.child = nil
}

// Prepare asks the driver to prepare c, as the kubelet does.
func (p *Proc) Prepare(c *resourcev1.ResourceClaim) (*drapbv1.NodePrepareResourceResponse, error) {
	resp, err := p.dra.NodePrepareResources(context.Background(), &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}}})
	if err != nil {
		return nil, err
	}
	return resp.Claims[string(c.UID)], nil
}

// Unprepare asks the driver to unprepare c, as the kubelet does.
func (p *Proc) Unprepare(c *resourcev1.ResourceClaim) error {
	resp, err := p.dra.NodeUnprepareResources(context.Background(), &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}}})
	if err != nil {
		return err
	}
	if msg := resp.Claims[string(c.UID)].Error; msg != "" {
		return errors.New(msg)
	}
	return nil
}

// logWriter sends the child's log to the test log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Logf("driver: %s", b)
	return len(b), nil
}
