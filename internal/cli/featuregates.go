package cli

import (
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/component-base/featuregate"

	"github.com/dractl/dractl/pkg/core/features"
)

// specOf is a gate's component-base spec: on by default (dractl enables
// every gate and locks none, so that a cluster of any release can be
// modelled), at its Kubernetes stage.
func specOf(g features.Gate) featuregate.FeatureSpec {
	spec := featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}
	switch stage, _ := features.StageOf(g); stage {
	case features.Alpha:
		spec.PreRelease = featuregate.Alpha
	case features.Beta:
		spec.PreRelease = featuregate.Beta
	}
	return spec
}

// newFeatureGate is a Kubernetes feature gate holding the allocation gates
// and their dependencies, so that --feature-gates is read exactly as
// kube-scheduler reads it: the same syntax, the same errors.
func newFeatureGate() featuregate.MutableFeatureGate {
	fg := featuregate.NewFeatureGate()
	specs := map[featuregate.Feature]featuregate.FeatureSpec{}
	for _, g := range features.Gates() {
		specs[featuregate.Feature(g)] = specOf(g)
	}
	deps := map[featuregate.Feature][]featuregate.Feature{}
	for g, on := range features.Dependencies {
		for _, d := range on {
			deps[featuregate.Feature(g)] = append(deps[featuregate.Feature(g)], featuregate.Feature(d))
		}
	}
	// Both only fail on a programming error in pkg/core/features' tables,
	// which every test run would show.
	if err := fg.Add(specs); err != nil {
		panic(err)
	}
	if err := fg.AddDependencies(deps); err != nil {
		panic(err)
	}
	return fg
}

// addFeatureGatesFlag adds --feature-gates to a verb that allocates.
func addFeatureGatesFlag(cmd *cobra.Command, value *string) {
	known := newFeatureGate().KnownFeatures()
	cmd.Flags().StringVar(value, "feature-gates", "", "A set of key=value pairs that describe feature gates for DRA allocation, as kube-scheduler takes them; every gate is on by default. Options are:\n"+
		strings.Join(known, "\n"))
}

// parseFeatureGates reads a --feature-gates value. A bad value is a usage
// error.
func parseFeatureGates(value string) (features.Set, error) {
	set := features.All()
	if value == "" {
		return set, nil
	}
	fg := newFeatureGate()
	// Setting a GA gate makes featuregate log a warning; dractl's output
	// is its answer, so the logger is silent.
	if err := fg.(interface {
		SetWithLogger(logr.Logger, string) error
	}).SetWithLogger(logr.Discard(), value); err != nil {
		return set, usageErrorf("--feature-gates: %v", err)
	}
	for _, g := range features.Gates() {
		set = set.With(g, fg.Enabled(featuregate.Feature(g)))
	}
	return set, nil
}
