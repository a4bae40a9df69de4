package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// kubeconfigFile has two contexts, so that --context, --cluster and
// --user each pick something other than the current one.
const kubeconfigFile = `apiVersion: v1
kind: Config
current-context: one
clusters:
- name: c1
  cluster: {server: "https://one.test:6443", certificate-authority-data: Y2Ex}
- name: c2
  cluster: {server: "https://two.test:6443", insecure-skip-tls-verify: true}
users:
- name: u1
  user: {token: token-one}
- name: u2
  user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}
contexts:
- name: one
  context: {cluster: c1, user: u1, namespace: team-a}
- name: two
  context: {cluster: c2, user: u2}
`

// TestClusterFlagsAreKubectls: the connection flags are kubectl's
// ConfigFlags' (k8s.io/cli-runtime), flag by flag (name, shorthand, type,
// default), but for --cache-dir (the discovery cache, which no verb
// makes), and every command line gives the client configuration and the
// namespace ConfigFlags gives.
func TestClusterFlagsAreKubectls(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(kubeconfigFile), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "client.crt", "client.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", dir) // no ~/.kube/config of the machine's
	t.Setenv("KUBECONFIG", kc)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")

	ours := func() (*clusterOptions, *pflag.FlagSet) {
		cmd := &cobra.Command{Use: "x"}
		c := addClusterFlags(cmd, 0)
		return c, cmd.Flags()
	}
	kubectls := func() (*genericclioptions.ConfigFlags, *pflag.FlagSet) {
		f := genericclioptions.NewConfigFlags(false)
		fs := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
		f.AddFlags(fs)
		return f, fs
	}

	_, ofs := ours()
	_, kfs := kubectls()
	kfs.VisitAll(func(k *pflag.Flag) {
		if k.Name == "cache-dir" {
			return
		}
		o := ofs.Lookup(k.Name)
		if o == nil {
			t.Errorf("--%s: kubectl has it, dractl does not", k.Name)
			return
		}
		if o.Shorthand != k.Shorthand || o.Value.Type() != k.Value.Type() || o.DefValue != k.DefValue {
			t.Errorf("--%s: -%s %s default %q, kubectl's -%s %s default %q", k.Name, o.Shorthand, o.Value.Type(), o.DefValue,
				k.Shorthand, k.Value.Type(), k.DefValue)
		}
	})
	ofs.VisitAll(func(o *pflag.Flag) {
		if kfs.Lookup(o.Name) == nil && o.Name != "chunk-size" {
			t.Errorf("--%s: dractl has it, kubectl does not", o.Name)
		}
	})

	ca, crt, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	for _, line := range []string{
		"",
		"--context two",
		"--context two -n ns/team-b",
		"--kubeconfig " + kc + " --namespace team-c",
		"--cluster c2 --user u2",
		"-s https://three.test:443 --token token-three",
		"--server https://three.test:443 --tls-server-name api.three.test --certificate-authority " + ca,
		"--insecure-skip-tls-verify --disable-compression --request-timeout 5s",
		"--client-certificate " + crt + " --client-key " + key,
		"--as alice --as-group g1 --as-group g2 --as-uid 42 --as-user-extra scopes=a --as-user-extra scopes=b --as-user-extra team=x",
		"--proxy-url http://proxy.test:3128",
	} {
		args := strings.Fields(line)
		c, ofs := ours()
		k, kfs := kubectls()
		if err := ofs.Parse(args); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if err := kfs.Parse(args); err != nil {
			t.Fatalf("%q: kubectl: %v", line, err)
		}
		got, err := c.restConfig()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		want, err := k.ToRESTConfig()
		if err != nil {
			t.Fatalf("%q: kubectl: %v", line, err)
		}
		if g, w := comparable(t, got), comparable(t, want); !reflect.DeepEqual(g, w) {
			t.Errorf("%q: client configuration\n%+v\nkubectl's\n%+v", line, g, w)
		}
		gotNS, err := c.namespace()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		wantNS, _, err := k.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			t.Fatal(err)
		}
		if gotNS != wantNS {
			t.Errorf("%q: namespace %q, kubectl's %q", line, gotNS, wantNS)
		}
	}

	// Where nothing names a server, kubectl falls back to
	// http://localhost:8080; dractl refuses instead (restConfig), and
	// follows kubectl again once $KUBERNETES_MASTER names one.
	t.Run("no kubeconfig anywhere: refused, not localhost:8080", func(t *testing.T) {
		t.Setenv("KUBECONFIG", filepath.Join(dir, "missing"))
		c, _ := ours()
		if _, err := c.restConfig(); err == nil || !strings.Contains(err.Error(), "no cluster to read") {
			t.Errorf("restConfig: %v, want the no-cluster refusal", err)
		}
		t.Setenv("KUBERNETES_MASTER", "https://master.test:6443")
		c, _ = ours()
		k, _ := kubectls()
		got, err := c.restConfig()
		if err != nil {
			t.Fatal(err)
		}
		want, err := k.ToRESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		// client-go reads $KUBERNETES_MASTER once, when it starts: both
		// hosts are what it read then.
		if got.Host != want.Host || got.Host == "" {
			t.Errorf("host %q, kubectl's %q", got.Host, want.Host)
		}
	})

	t.Run("an --as-user-extra without = is refused, not dropped", func(t *testing.T) {
		c, fs := ours()
		if err := fs.Parse([]string{"--as-user-extra", "scopes"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.restConfig(); err == nil || !strings.Contains(err.Error(), `--as-user-extra "scopes": want KEY=VALUE`) {
			t.Errorf("err %v", err)
		}
	})
}

// comparable is cfg without what cannot be compared (functions), with
// the proxy it picks for a request to the server instead.
func comparable(t *testing.T, cfg *rest.Config) *rest.Config {
	t.Helper()
	out := rest.CopyConfig(cfg)
	if out.Proxy != nil {
		req, err := http.NewRequest(http.MethodGet, out.Host, nil)
		if err != nil {
			t.Fatal(err)
		}
		u, err := out.Proxy(req)
		if err != nil {
			t.Fatal(err)
		}
		out.Proxy = nil
		if u != nil {
			out.UserAgent += " proxy=" + u.String()
		}
	}
	out.Dial, out.WrapTransport, out.ExecProvider = nil, nil, nil
	return out
}
