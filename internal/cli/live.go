package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/validation"
	"github.com/dractl/dractl/pkg/ops/live"
)

// clusterOptions are kubectl's connection flags (--kubeconfig, --context,
// -n, --server, --token, --as, --request-timeout, ...) for the verbs that
// read a cluster, bound by client-go's clientcmd as kubectl's
// ConfigFlags (k8s.io/cli-runtime) binds them and with the same
// fallbacks. Not ConfigFlags itself: its package links kubectl's
// resource builder, printers and kustomize, 29 MB of a stripped dractl.
// TestClusterFlagsAreKubectls holds the two to the same flags and the
// same client configuration.
type clusterOptions struct {
	rules     *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	// userExtra is --as-user-extra, KEY=VALUE, repeatable.
	userExtra []string
	// pageSize is --chunk-size, kubectl's name for the list limit.
	pageSize int64
}

// addClusterFlags registers kubectl's connection flags. timeout is the
// default of --request-timeout, shown in the help as what it is: the
// one-shot verbs bound every request (live.DefaultTimeout), the monitor's
// watches run for as long as it does (0).
func addClusterFlags(cmd *cobra.Command, timeout time.Duration) *clusterOptions {
	c := &clusterOptions{
		rules: clientcmd.NewDefaultClientConfigLoadingRules(),
		// Without any kubeconfig, kubectl's defaults.
		overrides: clientcmd.ConfigOverrides{ClusterDefaults: clientcmd.ClusterDefaults},
	}
	c.rules.DefaultClientConfig = &clientcmd.DefaultClientConfig
	fs := cmd.Flags()
	fs.StringVar(&c.rules.ExplicitPath, "kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	// Bound below as kubectl binds it, without clientcmd's stripping of
	// a "ns/" prefix.
	ns := names.ContextOverrideFlags.Namespace
	names.ContextOverrideFlags.Namespace = clientcmd.FlagInfo{}
	// Basic authentication is not offered, as kubectl does not.
	names.AuthOverrideFlags.Username, names.AuthOverrideFlags.Password = clientcmd.FlagInfo{}, clientcmd.FlagInfo{}
	names.Timeout.Default = "0"
	if timeout > 0 {
		names.Timeout.Default = strconv.Itoa(int(timeout/time.Second)) + "s"
	}
	clientcmd.BindOverrideFlags(&c.overrides, fs, names)
	fs.StringVarP(&c.overrides.Context.Namespace, ns.LongName, ns.ShortName, ns.Default, ns.Description)
	fs.StringArrayVar(&c.userExtra, "as-user-extra", nil, "a user extra to impersonate, KEY=VALUE (repeatable, also for several values of one key)")
	fs.Int64Var(&c.pageSize, "chunk-size", live.DefaultPageSize,
		"list objects in pages of this many (0: one request per kind, not recommended on large clusters)")
	return c
}

// loader is the client configuration the flags name.
func (c *clusterOptions) loader() (clientcmd.ClientConfig, error) {
	overrides := c.overrides
	if len(c.userExtra) > 0 {
		overrides.AuthInfo.ImpersonateUserExtra = map[string][]string{}
		for _, kv := range c.userExtra {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usageErrorf("--as-user-extra %q: want KEY=VALUE", kv)
			}
			overrides.AuthInfo.ImpersonateUserExtra[k] = append(overrides.AuthInfo.ImpersonateUserExtra[k], v)
		}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(c.rules, &overrides), nil
}

// restConfig is the configuration of the cluster the flags name. When
// nothing names one (no kubeconfig with a server, no --server, not in a
// pod), client-go falls back to http://localhost:8080, which is at best
// nothing and at worst another program (the monitor's own metrics port):
// every live verb refuses that at once instead. A kubeconfig that cannot
// be loaded is a usage error too: nothing was read.
func (c *clusterOptions) restConfig() (*rest.Config, error) {
	l, err := c.loader()
	if err != nil {
		return nil, err
	}
	cfg, err := l.ClientConfig()
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	if !c.serverNamed(l) && !inCluster() {
		return nil, usageErrorf("no cluster to read: no kubeconfig names a server (--kubeconfig, $KUBECONFIG or ~/.kube/config), --server is not given, and dractl does not run in a pod")
	}
	return cfg, nil
}

// serverNamed reports whether the flags or the kubeconfig they load name
// the API server, rather than leaving it to client-go's default.
func (c *clusterOptions) serverNamed(l clientcmd.ClientConfig) bool {
	if c.overrides.ClusterInfo.Server != "" || os.Getenv("KUBERNETES_MASTER") != "" {
		return true
	}
	raw, err := l.RawConfig()
	if err != nil {
		return false
	}
	context := raw.CurrentContext
	if c.overrides.CurrentContext != "" {
		context = c.overrides.CurrentContext
	}
	cluster := ""
	if ctx, ok := raw.Contexts[context]; ok {
		cluster = ctx.Cluster
	}
	if c.overrides.Context.Cluster != "" {
		cluster = c.overrides.Context.Cluster
	}
	cl, ok := raw.Clusters[cluster]
	return ok && cl.Server != ""
}

// inCluster reports whether a pod's service account configuration is
// there, which client-go uses when no kubeconfig names a server.
func inCluster() bool {
	_, err := rest.InClusterConfig()
	return err == nil
}

// client connects to the cluster the flags name.
func (c *clusterOptions) client() (*live.Client, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		// --request-timeout 0: no timeout, as kubectl reads it.
		cfg.Timeout = live.NoTimeout
	}
	lc, err := live.NewClient(cfg)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	lc.PageSize = c.pageSize
	if c.pageSize == 0 {
		lc.PageSize = -1
	}
	return lc, nil
}

// namespace is -n, or the kubeconfig context's namespace, or "default".
func (c *clusterOptions) namespace() (string, error) {
	l, err := c.loader()
	if err != nil {
		return "", err
	}
	ns, _, err := l.Namespace()
	if err != nil {
		return "", usageErrorf("%v", err)
	}
	return ns, nil
}

// clusterError reports a request the cluster did not answer or refused.
// Like an unreadable file, it means nothing was checked: exit 2.
func clusterError(err error) error {
	var le *live.Error
	if errors.As(err, &le) {
		return &exitError{code: ExitUsage, msg: le.Error()}
	}
	return &exitError{code: ExitUsage, msg: err.Error()}
}

// readLive reads the cluster's DRA objects as validate's input.
func readLive(ctx context.Context, cluster *clusterOptions) (*input, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := cluster.client()
	if err != nil {
		return nil, err
	}
	objs, err := c.Read(ctx, live.KindSlices|live.KindClasses|live.KindClaims|live.KindTemplates|live.KindTaintRules)
	if err != nil {
		return nil, clusterError(err)
	}
	in := &input{}
	add := func(kind string, meta metav1.Object, obj any) {
		in.objects = append(in.objects, decode.Object{
			Source: decode.Source{File: "cluster", Item: -1},
			Kind:   kind, Name: meta.GetName(), Namespace: meta.GetNamespace(), Obj: obj,
		})
	}
	for _, s := range objs.Slices {
		add(api.KindSlice, s, api.FromUpstream(s))
	}
	for _, c := range objs.Classes {
		add("DeviceClass", c, c)
	}
	for _, c := range objs.Claims {
		add("ResourceClaim", c, c)
	}
	for _, t := range objs.Templates {
		add("ResourceClaimTemplate", t, t)
	}
	for _, r := range objs.TaintRules {
		add("DeviceTaintRule", r, r)
	}
	// The cluster's own kube-apiserver is the one to judge by; one of a
	// minor dractl has no rules for is judged by the nearest supported
	// minor's, and told so; one whose minor cannot be read gets every
	// supported minor's verdict.
	info, err := c.ServerVersion()
	if err != nil {
		return nil, clusterError(err)
	}
	if v, err := validation.ServerKubeVersion(info); err == nil {
		nearest := v.Nearest()
		in.kubeVersion = &nearest
		if nearest != v {
			in.note = fmt.Sprintf("note: kube-apiserver %s serves the API of %s, which dractl has no rules of; judged as %s, the nearest of %s",
				info.GitVersion, v, nearest, validation.SupportedList())
		}
	}
	return in, nil
}
