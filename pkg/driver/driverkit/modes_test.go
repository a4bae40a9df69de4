package driverkit_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dractl/dractl/pkg/driver/driverkit"
)

// TestFileModes runs a driver under umask 0, the worst a node's process
// may inherit, prepares a claim and inspects everything the driver and
// the mock GPUs wrote: the registration and DRA sockets, the checkpoints,
// the CDI spec and the partition records. A node admin expects none of
// them writable by other users, and the sockets, through which any claim
// on the node can be prepared, reachable by their owner (the kubelet's
// root) only.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	e := newEnv(t)
	a := claim("a", migDev(0, "1g.5gb", 0))
	client := fake.NewClientset([]runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}}, a}...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg, plugin := serveOverSockets(ctx, t, e, client, 0)

	conn, err := grpc.NewClient("unix://"+filepath.Join(plugin, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := drapbv1.NewDRAPluginClient(conn).NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{
		Claims: []*drapbv1.Claim{{Namespace: a.Namespace, Name: a.Name, Uid: string(a.UID)}}})
	if err != nil || resp.Claims[string(a.UID)].Error != "" {
		t.Fatalf("prepare: %v, %v", resp, err)
	}

	// What each kind of file is, by where it lies; every kind must be seen
	// so that a renamed directory does not turn the test into a no-op.
	seen := map[string]int{}
	check := func(root string) {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path == root {
				return nil // the test's, not the driver's
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := info.Mode()
			rel, _ := filepath.Rel(e.Dir, path)
			switch {
			case mode&fs.ModeSocket != 0:
				seen["socket"]++
				if perm := mode.Perm(); perm != driverkit.SocketMode {
					t.Errorf("socket %s has mode %v, want %v", path, perm, driverkit.SocketMode)
				}
				return nil
			case d.IsDir():
				seen["directory"]++
			case strings.HasPrefix(rel, "cdi"+string(filepath.Separator)):
				seen["CDI spec"]++
			case strings.HasPrefix(rel, "gpus"+string(filepath.Separator)):
				seen["partition record"]++
			case strings.HasPrefix(path, e.Dir):
				seen["checkpoint"]++
			}
			// Group- or world-writable lets another user forge a
			// checkpoint (a claim that looks prepared) or a CDI spec (a
			// device injected into someone else's container).
			if perm := mode.Perm(); perm&0o022 != 0 {
				t.Errorf("%s has mode %v: writable by group or others", path, perm)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check(e.Dir)
	check(reg)
	check(plugin)
	for _, kind := range []string{"socket", "directory", "CDI spec", "partition record", "checkpoint"} {
		if seen[kind] == 0 {
			t.Errorf("no %s found; seen %v", kind, seen)
		}
	}
	if seen["socket"] != 2 {
		t.Errorf("%d sockets, want the registration and the DRA socket", seen["socket"])
	}
}
