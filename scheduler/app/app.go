// Package app builds the dractl-scheduler command; the e2e tests and
// benchmarks run the same command in-process.
package app

import (
	"context"
	"fmt"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/scheduler/schedplugin"
)

// NewCommand returns kube-scheduler's command with dractl's plugin
// registered under schedplugin.Name. The plugin reads kube-scheduler's
// feature gates (--feature-gates) when the scheduler builds its profiles,
// after the flags are parsed. --version names the Kubernetes release the
// binary is built from, which kube-scheduler's own flag cannot know
// without linker flags.
func NewCommand(opts ...app.Option) *cobra.Command {
	cmd := app.NewSchedulerCommand(append([]app.Option{Option()}, opts...)...)
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if f := cmd.Flags().Lookup("version"); f != nil && f.Value.String() != "false" {
			fmt.Fprintln(cmd.OutOrStdout(), VersionLine())
			return nil
		}
		return run(cmd, args)
	}
	return cmd
}

// Option registers dractl's plugin with a kube-scheduler command. Before
// the first profile's plugin is made, which is before the scheduler
// serves, elects a leader or schedules anything, kube-apiserver's version
// is checked against kube-scheduler's skew policy (checkSkew): a
// scheduler started against an older kube-apiserver exits with the rule.
func Option() app.Option {
	return pluginOption(func(fh fwk.Handle) error { return checkServer(fh.ClientSet().Discovery(), KubeVersion()) })
}

// pluginOption registers the plugin with skew as the check made once
// before the first plugin.
func pluginOption(skew func(fwk.Handle) error) app.Option {
	var (
		once    sync.Once
		skewErr error
	)
	return app.WithPlugin(schedplugin.Name, func(ctx context.Context, args runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		once.Do(func() { skewErr = skew(fh) })
		if skewErr != nil {
			return nil, skewErr
		}
		return schedplugin.New(ctx, args, fh, schedplugin.FeaturesFrom(utilfeature.DefaultFeatureGate), state.Options{})
	})
}
