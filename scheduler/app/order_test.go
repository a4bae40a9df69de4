package app

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	kubeapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/dractl/dractl/pkg/scheduler/schedplugin"
)

// effectivePlugins builds the scheduler kube-scheduler's own code builds
// from a configuration file ("" for its defaults), without running it,
// and returns each profile's plugins at every extension point, in the
// order the framework calls them.
func effectivePlugins(t *testing.T, configFile string) map[string]*config.Plugins {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	opts := options.NewOptions()
	opts.ConfigFile = configFile
	// Nothing is sent to it: the scheduler is built, not started, and
	// the version skew (skew_test.go) is not asked.
	opts.Master = "http://127.0.0.1:1"
	opts.SecureServing.BindPort = 0 // no /healthz or /metrics listener
	_, sched, err := kubeapp.Setup(ctx, opts, pluginOption(func(fwk.Handle) error { return nil }))
	if err != nil {
		t.Fatalf("building the scheduler of %q: %v", configFile, err)
	}
	out := map[string]*config.Plugins{}
	for name, fw := range sched.Profiles {
		out[name] = fw.ListPlugins()
	}
	return out
}

// extensionPoints lists a Plugins' extension points by name.
func extensionPoints(p *config.Plugins) map[string][]config.Plugin {
	out := map[string][]config.Plugin{}
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		if set, ok := v.Field(i).Interface().(config.PluginSet); ok {
			out[v.Type().Field(i).Name] = set.Enabled
		}
	}
	return out
}

// dractlDiffers are the extension points at which dractl's plugin and
// DynamicResources differ in what they implement, and why. Anywhere else
// dractl's plugin must sit exactly where DynamicResources does.
var dractlDiffers = map[string]string{
	// Scoring needs the cycle's results per node once, before Score.
	"PreScore": "dractl only",
}

// TestPluginOrder: every profile of deploy/scheduler that runs dractl's
// plugin calls it exactly where kube-scheduler's defaults call
// DynamicResources, at every extension point and with its score weight
// (upstream runs its PostFilter before DefaultPreemption, so that an idle
// claim is deallocated before a pod is evicted); a profile that keeps the
// stock plugin is the default profile unchanged.
func TestPluginOrder(t *testing.T) {
	stock := effectivePlugins(t, "")["default-scheduler"]
	if stock == nil {
		t.Fatal("kube-scheduler's defaults have no default-scheduler profile")
	}
	want := extensionPoints(stock)
	for _, file := range []string{"config.yaml", "config-replace.yaml", "config-two-profiles.yaml"} {
		t.Run(file, func(t *testing.T) {
			profiles := effectivePlugins(t, filepath.Join("..", "..", "deploy", "scheduler", file))
			dractl := 0
			for name, p := range profiles {
				got := extensionPoints(p)
				uses := slices.ContainsFunc(got["Filter"], func(p config.Plugin) bool { return p.Name == schedplugin.Name })
				if uses {
					dractl++
				}
				for point, plugins := range want {
					expect := plugins
					if uses {
						expect = asDractl(point, plugins, got[point])
					}
					if !slices.Equal(got[point], expect) {
						t.Errorf("profile %s, %s: plugins %v, want %v", name, point, got[point], expect)
					}
				}
			}
			if dractl != 1 {
				t.Errorf("%d profiles run %s, want 1", dractl, schedplugin.Name)
			}
		})
	}
}

// asDractl is what an extension point should hold with dractl's plugin in
// place of DynamicResources.
func asDractl(point string, stock, got []config.Plugin) []config.Plugin {
	out := slices.Clone(stock)
	switch dractlDiffers[point] {
	case "dractl only":
		// Where the stock plugin is absent, dractl's runs after the others.
		if i := slices.IndexFunc(got, func(p config.Plugin) bool { return p.Name == schedplugin.Name }); i >= 0 {
			return slices.Insert(out, min(i, len(out)), got[i])
		}
		return out
	}
	for i := range out {
		if out[i].Name == names.DynamicResources {
			out[i].Name = schedplugin.Name
		}
	}
	return out
}
