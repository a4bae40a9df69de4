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
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/dractl/dractl/pkg/scheduler/schedplugin"
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

// workloadTimeout bounds a workload: the integration-test workloads take
// seconds with the in-tree plugin, and scheduler_perf would wait up to
// ten minutes for every batch of pods that never gets scheduled.
var workloadTimeout = flag.Duration("workload-timeout", 3*time.Minute, "cancel a workload that runs longer")

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
			for _, dractl := range []bool{false, true} {
				name := "in-tree"
				if dractl {
					name = "dractl"
				}
				t.Run(name, func(t *testing.T) {
					file, preRun := variant(t, configFile, dractl, true)
					perf.RunIntegrationPerfScheduling(t, file, perf.WithOutOfTreePluginRegistry(registry(t, dractl, true)), perf.WithPreRunFn(preRun))
				})
			}
		})
	}
}

// registry has the check (if check) and, for dractl, dractl's plugin
// registered exactly as dractl-scheduler registers it.
func registry(t testing.TB, dractl, check bool) frameworkruntime.Registry {
	r := frameworkruntime.Registry{}
	if check {
		r[checkName] = newCheck
	}
	if dractl {
		if err := app.Option()(r); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// variant writes a copy of the test cases in file whose scheduler
// configuration is each case's own (or the default) with the check added
// and, for dractl, dractl's plugin in place of DynamicResources. The
// default plugins depend on the feature gates of the workload, which
// scheduler_perf sets just before preRun runs, so the configurations are
// written there. preRun's cleanup fails the workload with what the check
// found.
func variant(t testing.TB, file string, dractl, check bool) (string, perf.PreRunFn) {
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
	out := filepath.Join(dir, configFile)
	if data, err = yaml.Marshal(cases); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out, func(tCtx ktesting.TContext, _ *perf.Workload) (func(), error) {
		for _, tg := range targets {
			if err := writeConfig(tg.base, tg.out, dractl, check); err != nil {
				return nil, err
			}
		}
		found.reset()
		var timedOut atomic.Bool
		timer := time.AfterFunc(*workloadTimeout, func() {
			timedOut.Store(true)
			tCtx.Cancel(fmt.Sprintf("the workload did not end within %s (-workload-timeout)", *workloadTimeout))
		})
		return func() {
			timer.Stop()
			if timedOut.Load() {
				// scheduler_perf's waits report only "context canceled".
				tCtx.Errorf("the workload did not end within %s (-workload-timeout)", *workloadTimeout)
			}
			// Bindings still in flight when the workload ended are not
			// checked; everything the workload waited for was.
			if n, first := found.list(); n > 0 {
				tCtx.Errorf("check: %d bound pods lack what DRA promises, among them:\n%s", n, strings.Join(first, "\n"))
			}
		}, nil
	}
}

// writeConfig reads the configuration at base (the default one if base is
// empty) as scheduler_perf does, adds the check and, for dractl, puts
// dractl's plugin where DynamicResources is, and writes the result to out.
// It then reads out back and checks that every profile's plugins are
// in-tree's, in the same order, with dractl's plugin in place of
// DynamicResources, and the check last.
func writeConfig(base, out string, dractl, check bool) error {
	cfg, err := loadConfig(base)
	if err != nil {
		return err
	}
	want := multiPoints(cfg)
	for p, ps := range want {
		for i := range ps {
			if dractl && ps[i].Name == names.DynamicResources {
				ps[i].Name = schedplugin.Name
			}
		}
		if check {
			ps = append(ps, config.Plugin{Name: checkName})
		}
		want[p] = ps
	}
	if dractl {
		if err := replaceDynamicResources(cfg); err != nil {
			return err
		}
	}
	for i := range cfg.Profiles {
		mp := &cfg.Profiles[i].Plugins.MultiPoint
		if check {
			mp.Enabled = append(mp.Enabled, config.Plugin{Name: checkName})
		}
		// Defaulting then keeps the listed order instead of appending the
		// plugins it does not know after its defaults.
		if !slices.ContainsFunc(mp.Disabled, func(pl config.Plugin) bool { return pl.Name == "*" }) {
			mp.Disabled = append(mp.Disabled, config.Plugin{Name: "*"})
		}
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
// every profile (weights stay) and turns its args into dractl's.
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

// checkName is a PostBind plugin both variants run besides upstream's
// checks. scheduler_perf's workloads wait until their pods are scheduled;
// a DRA plugin that ignores a pod's claims or its extended resources
// passes that. The check holds every bound pod to what DRA promises: each
// of its claims is allocated, and each extended resource a DeviceClass
// backs (and the node does not advertise) is in an allocated claim named
// in the pod's status.
const checkName = "SchedperfCheck"

// found collects what the check finds during one workload.
var found violations

type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = nil
}

func (v *violations) add(err string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err)
}

// list returns how many pods failed the check and the first few of them.
func (v *violations) list() (int, []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.errs), slices.Clone(v.errs[:min(len(v.errs), 5)])
}

type check struct{ client kubernetes.Interface }

var _ fwk.PostBindPlugin = &check{}

func newCheck(_ context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
	return &check{client: fh.ClientSet()}, nil
}

func (c *check) Name() string { return checkName }

func (c *check) PostBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	if err := c.pod(ctx, pod.Namespace, pod.Name, nodeName); err != nil && ctx.Err() == nil {
		found.add(err.Error())
	}
}

// pod checks a bound pod as the API server has it: the DRA plugin writes
// the claims' allocations and the pod's extended-resource claim before
// the binding.
func (c *check) pod(ctx context.Context, namespace, name, nodeName string) error {
	pod, err := c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for i := range pod.Spec.ResourceClaims {
		claimName, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return fmt.Errorf("pod %s/%s bound to %s: %w", namespace, name, nodeName, err)
		}
		if claimName == nil {
			continue // intentionally not created
		}
		if err := c.allocated(ctx, pod, *claimName); err != nil {
			return err
		}
	}
	node, err := c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	classes, err := c.client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ctr := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for resource := range ctr.Resources.Requests {
			if _, ok := node.Status.Allocatable[resource]; ok {
				continue // a device plugin's
			}
			class := backingClass(classes.Items, resource)
			if class == "" {
				continue
			}
			st := pod.Status.ExtendedResourceClaimStatus
			if st == nil || st.ResourceClaimName == "" {
				return fmt.Errorf("pod %s/%s bound to %s: container %s requests %s (DeviceClass %s), but the pod has no extended resource claim", namespace, name, nodeName, ctr.Name, resource, class)
			}
			if err := c.allocated(ctx, pod, st.ResourceClaimName); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *check) allocated(ctx context.Context, pod *v1.Pod, claimName string) error {
	claim, err := c.client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("pod %s/%s bound to %s: claim %s: %w", pod.Namespace, pod.Name, pod.Spec.NodeName, claimName, err)
	}
	if claim.Status.Allocation == nil {
		return fmt.Errorf("pod %s/%s bound to %s: claim %s is not allocated", pod.Namespace, pod.Name, pod.Spec.NodeName, claimName)
	}
	return nil
}

// backingClass is the DeviceClass that backs an extended resource: one
// naming it in spec.extendedResourceName, or the class of an implicit
// name (KEP-5004).
func backingClass(classes []resourcev1.DeviceClass, resource v1.ResourceName) string {
	for _, cl := range classes {
		if cl.Spec.ExtendedResourceName != nil && v1.ResourceName(*cl.Spec.ExtendedResourceName) == resource ||
			v1.ResourceName(resourcev1.ResourceDeviceClassPrefix+cl.Name) == resource {
			return cl.Name
		}
	}
	return ""
}
