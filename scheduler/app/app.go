// Package app builds the dractl-scheduler command; the e2e tests and
// benchmarks run the same command in-process.
package app

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/dractl/dractl/pkg/schedplugin"
	"github.com/dractl/dractl/pkg/state"
)

// NewCommand returns kube-scheduler's command with dractl's plugin
// registered under schedplugin.Name. The plugin reads kube-scheduler's
// feature gates (--feature-gates) when the scheduler builds its profiles,
// after the flags are parsed.
func NewCommand(opts ...app.Option) *cobra.Command {
	return app.NewSchedulerCommand(append([]app.Option{Option()}, opts...)...)
}

// Option registers dractl's plugin with a kube-scheduler command.
func Option() app.Option {
	return app.WithPlugin(schedplugin.Name, func(ctx context.Context, args runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		return schedplugin.New(ctx, args, fh, schedplugin.FeaturesFrom(utilfeature.DefaultFeatureGate), state.Options{})
	})
}
