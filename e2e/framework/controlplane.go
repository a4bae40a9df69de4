// Package framework runs a real Kubernetes control plane inside the test
// process, on loopback: an embedded etcd, kube-apiserver built from
// k8s.io/kubernetes with every DRA feature gate on, and the controllers a
// test asks for (Components), started against it the way their own
// binaries start them.
//
// A test gets one with StartControlPlane and tears it down through
// t.Cleanup. Components are added in Options.Components or later with
// ControlPlane.Start; each gets a context that ends at teardown, before
// the apiserver stops. Those here: ResourceClaimController, Scheduler,
// Node (a real node: containerd, runc and the kubelet) and Kubelet (the
// kubelet's DRA manager and plugin manager on one Node, no runtime). To
// add one, implement Component in this package, in its own file, and let
// tests list it in Options.Components.
package framework

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/featuregate"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// Component is something that runs against the control plane: a
// controller, a scheduler, a kubelet part. Start must return once the
// component runs (its informers synced, say) and keep it running until
// ctx ends; the control plane waits for nothing else at teardown, so a
// component that needs to finish work must do so before Start's goroutines
// return on ctx.Done.
type Component interface {
	// Name is used in logs and errors.
	Name() string
	Start(ctx context.Context, cp *ControlPlane) error
}

// Options configure a control plane. The zero value is what most tests
// want: every DRA feature on, RBAC authorization, and no components but
// the serviceaccount controller, which every control plane runs because
// pods cannot be created without it.
type Options struct {
	// FeatureGates override DRAFeatureGates (and may set any other gate).
	FeatureGates map[string]bool
	// APIServerFlags are extra kube-apiserver flags, e.g.
	// "--runtime-config=...". They are applied after the framework's.
	APIServerFlags []string
	// Components are started in order once the apiserver is ready.
	Components []Component
	// StallableEtcd puts a StallProxy between kube-apiserver and etcd
	// (ControlPlane.Etcd).
	StallableEtcd bool
}

// DRAFeatureGates lists the DRA features the control plane turns on:
// every DRA gate kube-apiserver 1.37 knows (GA ones included: setting a
// locked gate to its locked value is allowed), except those that depend
// on a feature outside DRA that is off by default (DRAWorkloadResourceClaims
// needs the alpha workload API), which tests that need them enable with
// Options.FeatureGates together with their dependencies.
func DRAFeatureGates() map[string]bool {
	fg := utilfeature.DefaultMutableFeatureGate
	all := fg.GetAll()
	deps := fg.Dependencies()
	isDRA := func(n featuregate.Feature) bool {
		return strings.HasPrefix(string(n), "DRA") || n == "DynamicResourceAllocation"
	}
	gates := map[string]bool{}
	for name, spec := range all {
		if !isDRA(name) || (spec.LockToDefault && !spec.Default) {
			continue
		}
		if slices.ContainsFunc(deps[name], func(d featuregate.Feature) bool { return !isDRA(d) && !all[d].Default }) {
			continue
		}
		gates[string(name)] = true
	}
	return gates
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Config is an administrator's (system:masters) client configuration.
	// Copy it before changing it: rest.CopyConfig.
	Config *rest.Config
	// Client is an administrator's clientset.
	Client kubernetes.Interface

	// Etcd stalls etcd as kube-apiserver sees it; nil unless
	// Options.StallableEtcd.
	Etcd *StallProxy

	tb      testing.TB
	server  apiservertesting.TestServer
	flags   []string
	storage *storagebackend.Config
	ctx     context.Context
	cancel  context.CancelFunc
	stopped bool
	// componentHost, when set, is where components' clients go instead
	// of kube-apiserver (a FaultProxy), whose certificate is componentCA.
	componentHost string
	componentCA   []byte
	// servingCA verifies kube-apiserver's serving certificate, which it
	// presents at its address (127.0.0.1) to clients in pods; Config's
	// CA is its loopback certificate's, presented only to clients asking
	// for apiserver-loopback-client by name.
	servingCA []byte
	// adminToken authenticates the administrator with a static token,
	// which, unlike the test server's loopback token, outlives a restart
	// of kube-apiserver.
	adminToken string
	// kcmToken authenticates kube-controller-manager
	// (system:kube-controller-manager), whose informers the controllers
	// here share.
	kcmToken string
	// nodeIDs authenticates kubelets as their nodes.
	nodeIDs *nodeIdentities
	// kubeletPKI is between kube-apiserver and real kubelets (Node).
	kubeletPKI *kubeletPKI
	// gates are the feature gates kube-apiserver runs with, which real
	// kubelets are given too.
	gates map[string]bool
	// rootCAOnce starts the RootCAPublisher with the first Node.
	rootCAOnce sync.Once
}

// StartControlPlane starts etcd, kube-apiserver and opts.Components and
// registers their teardown with tb.Cleanup.
func StartControlPlane(tb testing.TB, opts Options) *ControlPlane {
	tb.Helper()
	etcd := testserver.RunEtcd(tb, nil)
	storage := storagebackend.NewDefaultConfig("/"+strings.ReplaceAll(tb.Name(), "/", "_"), nil)
	storage.Transport.ServerList = etcd.Endpoints()
	var stall *StallProxy
	if opts.StallableEtcd {
		u, err := url.Parse(etcd.Endpoints()[0])
		if err != nil {
			tb.Fatal(err)
		}
		if stall, err = NewStallProxy(u.Host); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(stall.Close)
		storage.Transport.ServerList = []string{u.Scheme + "://" + stall.Addr}
	}
	adminToken, kcmToken := rand.Text(), rand.Text()
	tokens := filepath.Join(tb.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+`,e2e-admin,e2e-admin,"system:masters"`+"\n"+
		kcmToken+",system:kube-controller-manager,system:kube-controller-manager\n"), 0o600); err != nil {
		tb.Fatal(err)
	}

	gates := DRAFeatureGates()
	for k, v := range opts.FeatureGates {
		gates[k] = v
	}
	flags := []string{
		"--feature-gates=" + formatGates(gates),
		// Alpha and beta versions of resource.k8s.io serve the objects of
		// the alpha and beta features (DeviceTaintRule, pool status).
		"--runtime-config=resource.k8s.io/v1alpha3=true,resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true",
		// As a cluster set up by kubeadm: kubelets are confined to their
		// own node by the Node authorizer and NodeRestriction admission,
		// everyone else is authorized by RBAC.
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		// Privileged pods (the NVML driver's DaemonSet) are allowed or not
		// once per process: kube-apiserver keeps the setting in a global
		// that the first server of a test binary sets. Every control
		// plane allows them, so that none depends on which ran first.
		"--allow-privileged=true",
		"--token-auth-file=" + tokens,
	}
	nodeIDs := newNodeIdentities(tb)
	flags = append(flags, nodeIDs.flags()...)
	pki, err := newKubeletPKI(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	kubeletFlags, err := pki.apiServerFlags()
	if err != nil {
		tb.Fatal(err)
	}
	flags = append(flags, kubeletFlags...)
	flags = append(flags, opts.APIServerFlags...)
	cp := &ControlPlane{tb: tb, flags: flags, storage: storage, adminToken: adminToken, kcmToken: kcmToken, Etcd: stall, nodeIDs: nodeIDs,
		kubeletPKI: pki, gates: gates}
	if err := cp.startAPIServer(); err != nil {
		tb.Fatalf("starting kube-apiserver: %v", err)
	}
	cp.ctx, cp.cancel = context.WithCancel(context.Background())
	tb.Cleanup(cp.Stop)
	cp.Start(ServiceAccountController{})
	for _, c := range opts.Components {
		cp.Start(c)
	}
	return cp
}

func (cp *ControlPlane) startAPIServer() error {
	server, err := apiservertesting.StartTestServer(cp.tb, apiservertesting.NewDefaultTestServerOptions(), cp.flags, cp.storage)
	if err != nil {
		return err
	}
	// Self-signed (MaybeDefaultWithSelfSignedCerts): the file holds the
	// certificate and its CA.
	cert := server.ServerOpts.SecureServing.ServerCert
	servingCA, err := os.ReadFile(filepath.Join(cert.CertDirectory, cert.PairName+".crt"))
	if err != nil {
		server.TearDownFn()
		return fmt.Errorf("reading kube-apiserver's serving certificate: %w", err)
	}
	cp.servingCA = servingCA
	cfg := rest.CopyConfig(server.ClientConfig)
	cfg.BearerToken = cp.adminToken
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		server.TearDownFn()
		return err
	}
	cp.server, cp.Config, cp.Client = server, cfg, client
	return nil
}

// RestartAPIServer stops kube-apiserver and starts it again on the same
// etcd, as a rolling upgrade of a single control-plane node does; its
// address changes, so Config and Client are replaced (take them anew
// afterwards), and components reach it again only through a proxy whose
// backend the caller moves (FaultProxy.SetBackend). ServiceAccount tokens
// and the administrator's token stay valid.
func (cp *ControlPlane) RestartAPIServer() error {
	cp.server.TearDownFn()
	return cp.startAPIServer()
}

// RouteComponents sends the clients of components started from now on
// (ClientConfig, and the configurations of child processes made from it)
// through a FaultProxy in front of kube-apiserver.
func (cp *ControlPlane) RouteComponents(p *FaultProxy) {
	cp.componentHost, cp.componentCA = p.URL, p.CA
}

// Via returns a copy of cfg (a ServiceAccount's, say) that goes through
// the component proxy when one is set.
func (cp *ControlPlane) Via(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cp.componentHost != "" {
		cfg.Host = cp.componentHost
		cfg.TLSClientConfig = rest.TLSClientConfig{CAData: cp.componentCA}
	}
	return cfg
}

// Start starts a component against the running control plane.
func (cp *ControlPlane) Start(c Component) {
	cp.tb.Helper()
	if err := c.Start(cp.ctx, cp); err != nil {
		cp.tb.Fatalf("starting %s: %v", c.Name(), err)
	}
}

// Context ends when the control plane is torn down.
func (cp *ControlPlane) Context() context.Context { return cp.ctx }

// ClientConfig returns a copy of the administrator's configuration with
// the given user agent, the way each controller of kube-controller-manager
// gets its own.
func (cp *ControlPlane) ClientConfig(userAgent string) *rest.Config {
	cfg := cp.Via(cp.Config)
	cfg.UserAgent = userAgent
	return cfg
}

// ControllerClients returns the client configurations a controller of
// kube-controller-manager named name runs with: its informers read as
// kube-controller-manager (system:kube-controller-manager, which may list
// and watch everything), and it writes as its own ServiceAccount,
// kube-system/<name>, as kube-controller-manager runs its controllers
// with --use-service-account-credentials. What the controller may change
// is then exactly kube-apiserver's bootstrap role for it
// (system:controller:<name>).
func (cp *ControlPlane) ControllerClients(name string) (informers, writes *rest.Config) {
	informers = rest.AnonymousClientConfig(cp.Config)
	informers.BearerToken = cp.kcmToken
	informers.UserAgent = "kube-controller-manager/" + name
	writes = cp.ServiceAccount(cp.tb, metav1.NamespaceSystem, name)
	writes.UserAgent = "kube-controller-manager/" + name
	return cp.Via(informers), cp.Via(writes)
}

// Stop stops the components, then kube-apiserver; etcd stops at the end of
// the test. Calling it more than once is fine: tests of an unreachable
// apiserver call it early.
func (cp *ControlPlane) Stop() {
	if cp.stopped {
		return
	}
	cp.stopped = true
	cp.cancel()
	cp.server.TearDownFn()
}

// Kubeconfig writes a kubeconfig file for cfg (an administrator's when
// nil) into the test's temporary directory and returns its path, so that
// commands read it as they would in a real cluster (--kubeconfig).
func (cp *ControlPlane) Kubeconfig(cfg *rest.Config) string {
	cp.tb.Helper()
	if cfg == nil {
		cfg = cp.Config
	}
	user := &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateGroups:     cfg.Impersonate.Groups,
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos["e2e"] = user
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e", Namespace: "default"}
	kc.CurrentContext = "e2e"
	path := filepath.Join(cp.tb.TempDir(), fmt.Sprintf("kubeconfig-%d", time.Now().UnixNano()))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		cp.tb.Fatalf("writing kubeconfig: %v", err)
	}
	return path
}

func formatGates(gates map[string]bool) string {
	names := make([]string, 0, len(gates))
	for n := range gates {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%t", n, gates[n]))
	}
	return strings.Join(parts, ",")
}

// Enabled reports whether the control plane runs with a feature gate on;
// components in this process see the same gates as kube-apiserver.
func Enabled(gate string) bool {
	for name := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if string(name) == gate {
			return utilfeature.DefaultFeatureGate.Enabled(name)
		}
	}
	return false
}
