package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/decode"
	"github.com/dractl/dractl/pkg/live"
	"github.com/dractl/dractl/pkg/validation"
)

// clusterOptions are kubectl's connection flags (--kubeconfig, --context,
// -n, --server, --token, --as, --request-timeout, ...) for the verbs that
// read a cluster.
type clusterOptions struct {
	flags *genericclioptions.ConfigFlags
	// pageSize is --chunk-size, kubectl's name for the list limit.
	pageSize int64
}

func addClusterFlags(cmd *cobra.Command) *clusterOptions {
	c := &clusterOptions{flags: genericclioptions.NewConfigFlags(false)}
	c.flags.AddFlags(cmd.Flags())
	cmd.Flags().Int64Var(&c.pageSize, "chunk-size", live.DefaultPageSize,
		"list objects in pages of this many (0: one request per kind, not recommended on large clusters)")
	return c
}

// client connects to the cluster the flags name. A kubeconfig that cannot
// be loaded is a usage error: nothing was read.
func (c *clusterOptions) client() (*live.Client, error) {
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		return nil, usageErrorf("%v", err)
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
	ns, _, err := c.flags.ToRawKubeConfigLoader().Namespace()
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
		add(api.KindSlice, s, api.FromV1(s))
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
	// The cluster's own kube-apiserver is the one to judge by; one whose
	// minor dractl has no rules for gets every supported minor's verdict.
	sv, err := c.ServerVersion()
	if err != nil {
		return nil, clusterError(err)
	}
	if v, err := validation.ParseKubeVersion(sv); err == nil {
		in.kubeVersion = &v
	}
	return in, nil
}
