package matrix

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Cluster is a kube-apiserver process of one release on an etcd process
// of its own, both on loopback, with every DRA feature gate the release
// has turned on.
type Cluster struct {
	Release string
	Minor   int
	// Config is an administrator's (system:masters) client configuration.
	Config *rest.Config
	Client kubernetes.Interface
	// Gates are the DRA feature gates turned on: those the release's
	// --help lists, but for Off.
	Gates []string
	// Off are the DRA gates left off, each with the gates outside DRA it
	// depends on, which are off by default (kube-apiserver refuses to
	// start with one on and its dependencies off).
	Off map[string]string
	// RuntimeConfig are the resource.k8s.io versions beyond v1 that the
	// release serves, turned on.
	RuntimeConfig []string
	// WithoutV1 is a server started with resource.k8s.io/v1 turned off, as
	// a server older than 1.34 has none (StartWithoutV1).
	WithoutV1 bool
	dir       string
	log       *bytes.Buffer
}

// draGate matches a DRA feature gate in kube-apiserver's --help:
// "DRAAdminAccess=true|false (BETA - default=true)". Gates that are GA or
// deprecated are not listed there (they cannot be turned off or are on
// their way out).
var draGate = regexp.MustCompile(`\b(DRA[A-Za-z]+|DynamicResourceAllocation)=true\|false \((ALPHA|BETA) - default=(true|false)\)`)

// Gates lists the DRA feature gates a kube-apiserver binary has.
func Gates(binary string) ([]string, error) {
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --help: %w\n%s", binary, err, out)
	}
	var gates []string
	for _, m := range draGate.FindAllStringSubmatch(string(out), -1) {
		gates = append(gates, m[1])
	}
	sort.Strings(gates)
	return slices.Compact(gates), nil
}

// gateDependency is kube-apiserver's refusal of a gate whose
// dependencies are off.
var gateDependency = regexp.MustCompile(`(\w+) is enabled, but depends on features that are disabled: \[([^\]]*)\]`)

// resourceVersions are the versions of resource.k8s.io besides v1 that
// serve the alpha and beta features (DeviceTaintRule before 1.37); the
// ones a release does not have are left out at start.
var resourceVersions = []string{"v1alpha3", "v1beta1", "v1beta2"}

// Start starts etcd and the kube-apiserver of release from bin and stops
// them at the end of the test.
func Start(t testing.TB, bin, release string) *Cluster {
	t.Helper()
	return start(t, bin, release, false)
}

// StartWithoutV1 is Start with resource.k8s.io/v1 turned off
// (--runtime-config=resource.k8s.io/v1=false) and the group's alpha and
// beta versions on: what dractl meets on a server older than 1.34, which
// serves DRA in v1beta1 and v1beta2 only. The DynamicResourceAllocation
// gate is off too, and no other DRA gate on: with it on, kube-apiserver's
// own informers (the node authorizer's) wait for ResourceSlices in v1
// and it never gets ready. Only 1.34 lets the gate be turned off (1.35
// locks it on).
func StartWithoutV1(t testing.TB, bin, release string) *Cluster {
	t.Helper()
	return start(t, bin, release, true)
}

func start(t testing.TB, bin, release string, withoutV1 bool) *Cluster {
	t.Helper()
	minor, err := Minor(release)
	if err != nil {
		t.Fatal(err)
	}
	binary := APIServerBinary(bin, release)
	if !Built(binary, release) {
		t.Fatalf("%s is not kube-apiserver %s: make e2e-matrix builds it", binary, release)
	}
	gates, err := Gates(binary)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Release: release, Minor: minor, Gates: slices.Clone(gates), WithoutV1: withoutV1, dir: t.TempDir(), log: &bytes.Buffer{}}
	if withoutV1 {
		c.Gates = nil
	}
	etcdURL := c.startEtcd(t, filepath.Join(bin, "etcd"))

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(c.dir, "sa.key")
	writeFile(t, saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	token := rand.Text()
	tokens := filepath.Join(c.dir, "tokens.csv")
	writeFile(t, tokens, []byte(token+`,matrix-admin,matrix-admin,"system:masters"`+"\n"))
	port := freePort(t)
	certs := filepath.Join(c.dir, "certs")
	// The versions the release serves: a runtime-config naming one it does
	// not have fails the start, which says so, and so does a gate whose
	// dependencies are off; that version or gate is dropped and the start
	// tried again.
	versions := slices.Clone(resourceVersions)
	c.Off = map[string]string{}
	for attempt := 0; ; attempt++ {
		var on, rc []string
		for _, g := range c.Gates {
			on = append(on, g+"=true")
		}
		if withoutV1 {
			on = append(on, "DynamicResourceAllocation=false")
		}
		for _, v := range versions {
			rc = append(rc, "resource.k8s.io/"+v+"=true")
		}
		if withoutV1 {
			rc = append(rc, "resource.k8s.io/v1=false")
		}
		args := []string{
			"--etcd-servers=" + etcdURL,
			// Loopback only; 1.37 keeps no endpoints of the kubernetes
			// Service for a loopback address, and no pod needs them.
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + certs,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + saKey, "--service-account-signing-key-file=" + saKey,
			"--service-cluster-ip-range=10.0.0.0/24",
			"--token-auth-file=" + tokens,
			"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--feature-gates=" + strings.Join(on, ","),
		}
		if len(rc) > 0 {
			args = append(args, "--runtime-config="+strings.Join(rc, ","))
		}
		cmd := exec.Command(binary, args...)
		c.log.Reset()
		cmd.Stdout, cmd.Stderr = c.log, c.log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		c.Config = &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", port), BearerToken: token,
			TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(certs, "apiserver.crt")}, QPS: 100, Burst: 200}
		err := c.waitReady(exited)
		if err == nil {
			t.Cleanup(func() { stop(cmd.Process, exited, 30*time.Second) })
			break
		}
		_ = cmd.Process.Kill()
		if attempt > len(gates)+len(resourceVersions) {
			t.Fatalf("kube-apiserver %s did not start: %v\n%s", release, err, Tail(c.log.String(), 4000))
		}
		if m := gateDependency.FindStringSubmatch(c.log.String()); m != nil && slices.Contains(c.Gates, m[1]) {
			c.Gates = slices.DeleteFunc(c.Gates, func(g string) bool { return g == m[1] })
			c.Off[m[1]] = m[2]
			continue
		}
		dropped := false
		for i, v := range versions {
			if strings.Contains(c.log.String(), "resource.k8s.io/"+v) {
				versions = slices.Delete(versions, i, i+1)
				dropped = true
				break
			}
		}
		if !dropped {
			t.Fatalf("kube-apiserver %s did not start: %v\n%s", release, err, Tail(c.log.String(), 4000))
		}
	}
	c.RuntimeConfig = versions
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitReady waits for /readyz, or for the process to exit.
func (c *Cluster) waitReady(exited <-chan error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("exited: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := os.Stat(c.Config.CAFile); err != nil {
			continue
		}
		rt, err := rest.TransportFor(c.Config)
		if err != nil {
			return err
		}
		resp, err := (&http.Client{Transport: rt, Timeout: 5 * time.Second}).Get(c.Config.Host + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
	return fmt.Errorf("not ready after 2 minutes")
}

func (c *Cluster) startEtcd(t testing.TB, binary string) string {
	t.Helper()
	client, peer := freePort(t), freePort(t)
	clientURL, peerURL := fmt.Sprintf("http://127.0.0.1:%d", client), fmt.Sprintf("http://127.0.0.1:%d", peer)
	cmd := exec.Command(binary, "--name=matrix", "--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=matrix="+peerURL, "--unsafe-no-fsync")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { stop(cmd.Process, exited, 10*time.Second) })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("etcd exited: %v\n%s", err, log.String())
		default:
		}
		resp, err := http.Get(clientURL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return clientURL
			}
		}
	}
	t.Fatalf("etcd not healthy after 30 s\n%s", log.String())
	return ""
}

// Log is the end of kube-apiserver's log, for failures.
func (c *Cluster) Log() string { return Tail(c.log.String(), 8000) }

// Kubeconfig writes a kubeconfig for the administrator and returns its
// path.
func (c *Cluster) Kubeconfig(t testing.TB) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["matrix"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthority: c.Config.CAFile}
	kc.AuthInfos["matrix"] = &clientcmdapi.AuthInfo{Token: c.Config.BearerToken}
	kc.Contexts["matrix"] = &clientcmdapi.Context{Cluster: "matrix", AuthInfo: "matrix", Namespace: "default"}
	kc.CurrentContext = "matrix"
	path := filepath.Join(c.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// stop interrupts a process, and kills it when it has not exited after
// grace.
func stop(p *os.Process, exited <-chan error, grace time.Duration) {
	_ = p.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Tail is the last n bytes of a process's output, marked as cut.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
