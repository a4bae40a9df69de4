package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dractl/dractl/internal/testing/fakeapi"
)

// TestServerWithoutResourceV1: against a kube-apiserver that serves no
// resource.k8s.io/v1 (1.33, answering discovery and 404 for the DRA
// API, as it does), every live verb and the monitor stop with an error
// that names the API and the first minor that serves it, exit 2.
func TestServerWithoutResourceV1(t *testing.T) {
	srv := fakeapi.Server{Version: fakeapi.Release("v1.33.5", 33), Objects: map[string]any{
		"/api/v1/nodes/node-1": map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "node-1"}},
		"/api/v1/namespaces/default/pods/trainer": map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "trainer", "namespace": "default"},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x"}}}},
	}}.Serve()
	defer srv.Close()
	const want = "kube-apiserver v1.33.5 does not serve resourceslices in resource.k8s.io/v1 (Kubernetes 1.34 and newer do)"
	for _, args := range [][]string{
		{"get", "pools"},
		{"describe", "node", "node-1"},
		{"describe", "pool", "gpu.example.com/node-1"},
		{"explain", "pod/trainer"},
		{"validate", "--live"},
		{"snapshot", t.TempDir()},
		{"monitor", "--leader-elect=false", "--metrics-bind-address", "127.0.0.1:0"},
	} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out, errb bytes.Buffer
			code := RunAs(ctx, "dractl", append(args, "--server", srv.URL), Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			if code != ExitUsage || !strings.Contains(errb.String(), want) {
				t.Errorf("dractl %s: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, ExitUsage, want, out.String(), errb.String())
			}
		})
	}
}
