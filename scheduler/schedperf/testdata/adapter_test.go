// Package dractl runs the DRA test cases of kube-scheduler's scheduler_perf
// twice: with the in-tree DynamicResources plugin, and with dractl's plugin
// in its place. This file is dropped into a temporary module that holds a
// copy of scheduler_perf (package perf beside this one) by
// scheduler/schedperf; it is not compiled as part of the dractl repository.
//
// Tests are named TestSchedulerPerf/<suite>/<plugin>/<test case>/<workload>,
// which is what the runner reads.
package dractl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/dynamic-resource-allocation/structured"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/dractl/dractl/pkg/schedplugin"
	"github.com/dractl/dractl/scheduler/app"

	perf "schedperf/perf"
)

// suites are the directories below perf/dra with a performance-config.yaml,
// each with the allocator the in-tree plugin runs with there: the one
// upstream's integration test of that directory pins, or, where it runs
// several, the one its benchmark pins. dractl's plugin has its own
// allocator; the pin does not touch it.
var suites = []struct{ dir, allocator string }{
	{".", "incubating"},
	{"compatibilitygroups", "experimental"},
	{"consumablecapacity", "experimental"},
	{"devicetaints", "experimental"},
	{"extendedresource", "experimental"},
	{"extendedresource/scoring", "experimental"},
	{"listattributes", "experimental"},
	{"partitionabledevices", "experimental"},
	{"prioritizedlist", "incubating"},
	{"workloadresourceclaims", ""}, // upstream picks by features
}

const configFile = "performance-config.yaml"

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func TestSchedulerPerf(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "perf", "dra"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range suites {
		name := "dra"
		if s.dir != "." {
			name = strings.ReplaceAll(s.dir, "/", "-")
		}
		t.Run(name, func(t *testing.T) {
			// Paths in the configuration are relative to its directory.
			t.Chdir(filepath.Join(root, s.dir))
			if s.allocator != "" {
				structured.EnableAllocators(s.allocator)
				defer structured.EnableAllocators()
			}
			t.Run("in-tree", func(t *testing.T) {
				perf.RunIntegrationPerfScheduling(t, configFile)
			})
			t.Run("dractl", func(t *testing.T) {
				file, preRun := dractlVariant(t, configFile)
				perf.RunIntegrationPerfScheduling(t, file, perf.WithOutOfTreePluginRegistry(registry(t)), perf.WithPreRunFn(preRun))
			})
		})
	}
}

// registry registers dractl's plugin exactly as dractl-scheduler does.
func registry(t *testing.T) frameworkruntime.Registry {
	r := frameworkruntime.Registry{}
	if err := app.Option()(r); err != nil {
		t.Fatal(err)
	}
	return r
}

// dractlVariant writes a copy of the test cases in file whose scheduler
// configuration is each case's own (or the default) with dractl's plugin
// in place of DynamicResources. The default plugins depend on the feature
// gates of the workload, which scheduler_perf sets just before preRun
// runs, so the configurations are written there.
func dractlVariant(t *testing.T, file string) (string, perf.PreRunFn) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(data, &cases); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	dir := t.TempDir()
	type target struct{ base, out string }
	var targets []target
	for i, tc := range cases {
		var base string
		if p, ok := tc["schedulerConfigPath"].(string); ok && p != "" {
			if base, err = filepath.Abs(p); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(dir, fmt.Sprintf("scheduler-config-%d.yaml", i))
		tc["schedulerConfigPath"] = out
		targets = append(targets, target{base, out})
	}
	variant := filepath.Join(dir, configFile)
	if data, err = yaml.Marshal(cases); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(variant, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return variant, func(tCtx ktesting.TContext, _ *perf.Workload) (func(), error) {
		for _, tg := range targets {
			if err := writeDractlConfig(tg.base, tg.out); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
}

// writeDractlConfig reads the configuration at base (the default one if
// base is empty) as scheduler_perf does, puts dractl's plugin where
// DynamicResources is and writes the result to out. It then reads out
// back and checks that every profile's plugins are in-tree's, in the same
// order, with dractl's plugin in place of DynamicResources.
func writeDractlConfig(base, out string) error {
	cfg, err := loadConfig(base)
	if err != nil {
		return err
	}
	want := multiPoints(cfg)
	for _, ps := range want {
		for i := range ps {
			if ps[i].Name == names.DynamicResources {
				ps[i].Name = schedplugin.Name
			}
		}
	}
	if err := replaceDynamicResources(cfg); err != nil {
		return err
	}
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok {
		return errors.New("no YAML serializer for the scheduler configuration")
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, configv1.SchemeGroupVersion).Encode(cfg, f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	back, err := loadConfig(out)
	if err != nil {
		return err
	}
	if got := multiPoints(back); !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s: plugins %v, want in-tree's with %s for %s: %v", out, got, schedplugin.Name, names.DynamicResources, want)
	}
	for _, p := range back.Profiles {
		if !slices.ContainsFunc(p.PluginConfig, func(pc config.PluginConfig) bool { return pc.Name == schedplugin.Name }) &&
			slices.ContainsFunc(p.Plugins.MultiPoint.Enabled, func(pl config.Plugin) bool { return pl.Name == schedplugin.Name }) {
			return fmt.Errorf("%s: profile %s has no args for %s", out, p.SchedulerName, schedplugin.Name)
		}
	}
	return nil
}

// loadConfig decodes and defaults a configuration file as scheduler_perf
// does; an empty path is the default configuration.
func loadConfig(path string) (*config.KubeSchedulerConfiguration, error) {
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	gvk := configv1.SchemeGroupVersion.WithKind("KubeSchedulerConfiguration")
	cfg := &config.KubeSchedulerConfiguration{}
	if _, _, err := scheme.Codecs.UniversalDecoder().Decode(data, &gvk, cfg); err != nil {
		return nil, fmt.Errorf("decoding %q: %w", path, err)
	}
	return cfg, nil
}

// multiPoints are the profiles' multi-point plugins in order, which is the
// order kube-scheduler runs them at every extension point.
func multiPoints(cfg *config.KubeSchedulerConfiguration) [][]config.Plugin {
	var all [][]config.Plugin
	for _, p := range cfg.Profiles {
		all = append(all, slices.Clone(p.Plugins.MultiPoint.Enabled))
	}
	return all
}

// replaceDynamicResources renames DynamicResources in every plugin set of
// every profile (weights stay) and turns its args into dractl's. The
// multi-point set disables "*": defaulting then keeps the listed order
// instead of appending a plugin it does not know after its defaults.
func replaceDynamicResources(cfg *config.KubeSchedulerConfiguration) error {
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		if !slices.ContainsFunc(p.Plugins.MultiPoint.Enabled, func(pl config.Plugin) bool { return pl.Name == names.DynamicResources }) {
			// DRA is off: there is nothing to replace.
			continue
		}
		sets := reflect.ValueOf(p.Plugins).Elem()
		for f := 0; f < sets.NumField(); f++ {
			set, ok := sets.Field(f).Addr().Interface().(*config.PluginSet)
			if !ok {
				continue
			}
			for _, list := range [][]config.Plugin{set.Enabled, set.Disabled} {
				for j := range list {
					if list[j].Name == names.DynamicResources {
						list[j].Name = schedplugin.Name
					}
				}
			}
		}
		p.Plugins.MultiPoint.Disabled = append(p.Plugins.MultiPoint.Disabled, config.Plugin{Name: "*"})
		for j := range p.PluginConfig {
			pc := &p.PluginConfig[j]
			if pc.Name != names.DynamicResources {
				continue
			}
			in, ok := pc.Args.(*config.DynamicResourcesArgs)
			if !ok {
				return fmt.Errorf("profile %s: %s args are %T", p.SchedulerName, names.DynamicResources, pc.Args)
			}
			raw, err := json.Marshal(schedplugin.Args{FilterTimeout: in.FilterTimeout, BindingTimeout: in.BindingTimeout})
			if err != nil {
				return err
			}
			*pc = config.PluginConfig{Name: schedplugin.Name, Args: &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}}
		}
	}
	return nil
}
