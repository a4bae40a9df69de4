package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLiveVerbsNeedACluster: with no kubeconfig, no --server and no pod
// around it, every verb that reads a cluster exits 2 at once, instead of
// trying client-go's fallback http://localhost:8080 (for the monitor, its
// own metrics port, which it would poll for ever). Not parallel: it sets
// the environment client-go reads.
func TestLiveVerbsNeedACluster(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "missing-kubeconfig"))
	t.Setenv("KUBERNETES_MASTER", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	cases := []struct {
		name string
		args []string
	}{
		{"get", []string{"get", "pools"}},
		{"describe", []string{"describe", "node", "n"}},
		{"explain-pod", []string{"explain", "pod/p"}},
		{"validate-live", []string{"validate", "--live"}},
		{"snapshot", []string{"snapshot", filepath.Join(home, "snap")}},
		{"monitor", []string{"monitor", "--leader-elect=false", "--metrics-bind-address", "127.0.0.1:0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The deadline only keeps a monitor that does not stop from
			// hanging the test; the check is the exit code and message.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			code := RunAs(ctx, "dractl", tc.args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
			if ctx.Err() != nil {
				t.Fatalf("dractl %s ran until the test's deadline", strings.Join(tc.args, " "))
			}
			r := result{stdout: out.String(), stderr: errOut.String(), code: code}
			if r.code != ExitUsage {
				t.Errorf("dractl %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, ExitUsage, r)
			}
			if !strings.Contains(r.stderr, "no cluster to read") || strings.Contains(r.stderr, "localhost:8080") {
				t.Errorf("dractl %s does not say that no cluster is configured:\n%s", strings.Join(tc.args, " "), r)
			}
		})
	}
}

// TestRequestTimeoutDefault: --request-timeout shows the timeout each
// verb really has.
func TestRequestTimeoutDefault(t *testing.T) {
	for verb, want := range map[string]string{"get": `(default "60s")`, "describe": `(default "60s")`, "explain": `(default "60s")`, "validate": `(default "60s")`, "snapshot": `(default "60s")`, "monitor": `(default "0")`} {
		r := run(t, "", verb, "--help")
		i := strings.Index(r.stdout, "--request-timeout")
		if i < 0 {
			t.Fatalf("%s --help has no --request-timeout", verb)
		}
		line, _, _ := strings.Cut(r.stdout[i:], "\n")
		if !strings.HasSuffix(line, want) {
			t.Errorf("%s --help: %q, want it to end in %s", verb, line, want)
		}
	}
}
