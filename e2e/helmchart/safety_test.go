package helmchart

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
)

// schedulerConfig is what kube-scheduler reads from a
// KubeSchedulerConfiguration, with its own defaults applied (a lone
// profile without a name is default-scheduler; leader election on,
// through kube-system/kube-scheduler, unless the file says otherwise).
type schedulerConfig struct {
	profiles []string
	// lease is "namespace/name", "" without leader election.
	lease string
}

func readSchedulerConfig(t *testing.T, where, text string) schedulerConfig {
	t.Helper()
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode([]byte(text), nil, nil)
	if err != nil {
		t.Fatalf("%s: kube-scheduler cannot read the configuration: %v", where, err)
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		t.Fatalf("%s: decoded a %T", where, obj)
	}
	var out schedulerConfig
	for _, p := range cfg.Profiles {
		out.profiles = append(out.profiles, p.SchedulerName)
	}
	if le := cfg.LeaderElection; le.LeaderElect {
		out.lease = le.ResourceNamespace + "/" + le.ResourceName
	}
	return out
}

// documents splits a YAML stream into its non-empty documents, each as
// an object; text that is not YAML objects has none.
func documents(text string) []map[string]any {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	var out []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err == io.EOF {
			return out
		} else if err != nil {
			return nil // not YAML objects: plain text
		}
		if len(doc) > 0 {
			out = append(out, doc)
		}
	}
}

// schedulerConfigs are the KubeSchedulerConfigurations the rendered
// objects carry (a ConfigMap's data), by where they are.
func schedulerConfigs(t *testing.T, objs []*unstructured.Unstructured) map[string]schedulerConfig {
	t.Helper()
	out := map[string]schedulerConfig{}
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		for key, text := range data {
			where := fmt.Sprintf("ConfigMap %s/%s data %s", o.GetNamespace(), o.GetName(), key)
			for _, doc := range documents(text) {
				if doc["kind"] == "KubeSchedulerConfiguration" {
					out[where] = readSchedulerConfig(t, where, text)
				}
			}
		}
	}
	return out
}

// exampleDomain matches a DNS name under example.com, .net or .org (RFC
// 2606), the domains of made-up drivers and devices.
var exampleDomain = regexp.MustCompile(`(?i)(?:^|[^a-z0-9.-])((?:[a-z0-9-]+\.)*example\.(?:com|net|org))(?:$|[^a-z0-9-])`)

// walkStrings calls f with every string of v and its field path, and
// with every string of the YAML documents a string holds (a ConfigMap's).
func walkStrings(path string, v any, f func(path, s string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			walkStrings(path+"."+k, e, f)
		}
	case []any:
		for i, e := range v {
			walkStrings(fmt.Sprintf("%s[%d]", path, i), e, f)
		}
	case string:
		f(path, v)
		if strings.Contains(v, "\n") {
			for i, doc := range documents(v) {
				walkStrings(fmt.Sprintf("%s(document %d)", path, i), doc, f)
			}
		}
	}
}

// TestDefaultsAreSafe: installed with its default values, the chart
// starts no second default-scheduler (no KubeSchedulerConfiguration it
// carries has a profile named default-scheduler, as kube-scheduler reads
// it) and publishes no made-up devices (no string of any object, the
// publisher's pools and arguments included, names a domain under
// example.com).
func TestDefaultsAreSafe(t *testing.T) {
	objs := objects(t, nil)
	configs := schedulerConfigs(t, objs)
	if len(configs) == 0 {
		t.Fatal("no KubeSchedulerConfiguration rendered")
	}
	for where, cfg := range configs {
		if slices.Contains(cfg.profiles, "default-scheduler") {
			t.Errorf("%s: profiles %q: a second default-scheduler beside kube-scheduler", where, cfg.profiles)
		}
		if cfg.lease == "kube-system/kube-scheduler" {
			t.Errorf("%s: elects through kube-scheduler's Lease beside kube-scheduler", where)
		}
	}
	for _, o := range objs {
		walkStrings("", o.Object, func(path, s string) {
			if m := exampleDomain.FindStringSubmatch(s); m != nil {
				t.Errorf("%s %s/%s%s: %q is a made-up domain", o.GetKind(), o.GetNamespace(), o.GetName(), path, m[1])
			}
		})
	}
}

// TestSchedulerModes: the scheduler's configuration and
// scheduler.replaceKubeScheduler must agree, for the bundled
// configurations and one's own, as kube-scheduler reads them: a
// default-scheduler profile only in place of kube-scheduler, which then
// elects through kube-scheduler's Lease; beside it, never that Lease;
// replicas only with leader election. The RBAC grants the Lease the
// configuration elects through unless kube-scheduler's role does.
func TestSchedulerModes(t *testing.T) {
	bundled := func(file string) string {
		data, err := os.ReadFile(filepath.Join(repo, ChartDir, "files", "scheduler", file))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	for _, tc := range []struct {
		name     string
		config   string // a file of files/scheduler, or a configuration of one's own
		replace  bool
		replicas int
		// What kube-scheduler reads in the configuration.
		profiles []string
		lease    string
		// The chart's answer: the error it fails with, or the Lease its
		// RBAC grants ("" for none).
		err, granted string
	}{
		{name: "default: beside, dractl", config: "config.yaml", profiles: []string{"dractl"}, lease: "kube-system/dractl-scheduler", granted: "dractl-scheduler"},
		{name: "two profiles without replacing", config: "config-two-profiles.yaml", profiles: []string{"default-scheduler", "dractl"}, lease: "kube-system/kube-scheduler",
			err: "a profile named default-scheduler, which kube-scheduler serves"},
		{name: "two profiles in place of kube-scheduler", config: "config-two-profiles.yaml", replace: true, profiles: []string{"default-scheduler", "dractl"}, lease: "kube-system/kube-scheduler"},
		{name: "replace without replacing", config: "config-replace.yaml", profiles: []string{"default-scheduler"}, lease: "kube-system/kube-scheduler",
			err: "a profile named default-scheduler"},
		{name: "replace in place of kube-scheduler", config: "config-replace.yaml", replace: true, profiles: []string{"default-scheduler"}, lease: "kube-system/kube-scheduler"},
		{name: "replacing with no default profile", config: "config.yaml", replace: true, profiles: []string{"dractl"}, lease: "kube-system/dractl-scheduler",
			err: "no profile of the configuration is default-scheduler"},
		{name: "own: a lone unnamed profile is default-scheduler", config: head + "leaderElection:\n  resourceName: mine\n", profiles: []string{"default-scheduler"}, lease: "kube-system/mine",
			err: "a profile named default-scheduler"},
		{name: "own: named, but kube-scheduler's Lease by default", config: head + "profiles:\n- schedulerName: mine\n", profiles: []string{"mine"}, lease: "kube-system/kube-scheduler",
			err: "must not elect through kube-scheduler's Lease"},
		{name: "own: named, a Lease of its own", config: head + "leaderElection:\n  resourceNamespace: sched\n  resourceName: mine\nprofiles:\n- schedulerName: mine\n",
			profiles: []string{"mine"}, lease: "sched/mine", granted: "mine"},
		{name: "own: no election, two replicas", config: head + "leaderElection:\n  leaderElect: false\nprofiles:\n- schedulerName: mine\n", profiles: []string{"mine"},
			err: "scheduler.replicas is 2, but the configuration does not elect a leader"},
		{name: "own: no election, one replica", config: head + "leaderElection:\n  leaderElect: false\nprofiles:\n- schedulerName: mine\n", replicas: 1, profiles: []string{"mine"}},
		{name: "own: in place of kube-scheduler, another Lease", config: head + "leaderElection:\n  resourceName: mine\n", replace: true, profiles: []string{"default-scheduler"}, lease: "kube-system/mine",
			err: `elects through "kube-system/mine"`},
		{name: "own: in place of kube-scheduler, no election", config: head + "leaderElection:\n  leaderElect: false\n", replace: true, replicas: 1, profiles: []string{"default-scheduler"},
			err: `elects through "no Lease"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched := map[string]any{"replaceKubeScheduler": tc.replace}
			text := tc.config
			if strings.HasSuffix(tc.config, ".yaml") {
				sched["profile"] = tc.config
				text = bundled(tc.config)
			} else {
				sched["config"] = tc.config
			}
			if tc.replicas > 0 {
				sched["replicas"] = tc.replicas
			}
			// The case's account of the configuration is kube-scheduler's.
			got := readSchedulerConfig(t, tc.name, text)
			if !slices.Equal(got.profiles, tc.profiles) || got.lease != tc.lease {
				t.Fatalf("kube-scheduler reads profiles %q, Lease %q; the case says %q, %q", got.profiles, got.lease, tc.profiles, tc.lease)
			}
			rendered, err := Render(repo, map[string]any{"scheduler": sched})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var leases []string
			for _, doc := range documents(rendered["scheduler/rbac.yaml"]) {
				if doc["kind"] != "ClusterRole" {
					continue
				}
				u := &unstructured.Unstructured{Object: doc}
				rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
				for _, r := range rules {
					res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
					names, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resourceNames")
					if slices.Contains(res, "leases") {
						leases = append(leases, names...)
					}
				}
			}
			want := []string{}
			if tc.granted != "" {
				want = []string{tc.granted}
			}
			if !slices.Equal(append([]string{}, leases...), want) {
				t.Errorf("the scheduler's ClusterRole grants the Leases %q, want %q", leases, want)
			}
		})
	}
}

// TestPublisherValues: the publisher is off by default; on, it needs a
// driver and pools, publishes exactly those and rolls when they change.
func TestPublisherValues(t *testing.T) {
	if find(objects(t, nil), "Deployment", "dractl-pool-publisher") != nil {
		t.Error("the publisher is on by default")
	}
	for _, tc := range []struct {
		values map[string]any
		err    string
	}{
		{map[string]any{"enabled": true}, "publisher.driverName is empty"},
		{map[string]any{"enabled": true, "driverName": "nic.acme.test"}, "publisher.pools is empty"},
		{map[string]any{"enabled": true, "driverName": "nic.acme.test", "pools": " \n"}, "publisher.pools is empty"},
	} {
		if _, err := Render(repo, map[string]any{"publisher": tc.values}); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: err %v, want one saying %q", tc.values, err, tc.err)
		}
	}
	pools, err := os.ReadFile(filepath.Join(repo, "examples", "tpu-multihost", "resourceslices.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	on := func(pools string) []*unstructured.Unstructured {
		return objects(t, map[string]any{"publisher": map[string]any{"enabled": true, "driverName": "tpu.google.com", "pools": pools}})
	}
	objs := on(string(pools))
	cm := find(objs, "ConfigMap", "dractl-pools")
	d := find(objs, "Deployment", "dractl-pool-publisher")
	if cm == nil || d == nil || find(objs, "ClusterRole", "dractl-pool-publisher") == nil {
		t.Fatal("publisher on: no ConfigMap, Deployment or ClusterRole")
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "pools.yaml"); got != strings.TrimSpace(string(pools))+"\n" {
		t.Errorf("pools.yaml is not the pools given:\n%s", got)
	}
	if a := args(t, d); !slices.Contains(a, "--driver-name=tpu.google.com") {
		t.Errorf("publisher args %q", a)
	}
	other := find(on(strings.ReplaceAll(string(pools), "tpu-v5-lite-podslice", "tpu-v5e")), "Deployment", "dractl-pool-publisher")
	if a, b := podAnnotations(d)["dractl.dev/pools-sha256"], podAnnotations(other)["dractl.dev/pools-sha256"]; a == "" || a == b {
		t.Errorf("changed pools keep the checksum %q: the publisher would not roll", a)
	}
}

// TestKubeVersion: the chart installs only where its kube-scheduler may
// run under kube-scheduler's version-skew policy, against a
// kube-apiserver of its own minor version or one newer: Chart.yaml's
// kubeVersion is that range for the scheduler module's k8s.io/kubernetes,
// and Helm's install refuses the chart on any other version.
func TestKubeVersion(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(repo, "scheduler", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes v1\.(\d+)\.\d+`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("scheduler/go.mod requires no k8s.io/kubernetes v1.x")
	}
	minor, _ := strconv.Atoi(string(m[1]))
	chrt, err := loader.Load(filepath.Join(repo, ChartDir))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(">=1.%d.0-0 <1.%d.0-0", minor, minor+2); chrt.Metadata.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion %q, want %q for kube-scheduler 1.%d", chrt.Metadata.KubeVersion, want, minor)
	}
	if want := fmt.Sprintf("v1.%d.0", minor); KubeVersion != want {
		t.Errorf("deploy/ is rendered for Kubernetes %s, want %s, the scheduler module's", KubeVersion, want)
	}
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{fmt.Sprintf("v1.%d.9", minor-1), false},
		{fmt.Sprintf("v1.%d.0", minor), true},
		{fmt.Sprintf("v1.%d.3-gke.1200", minor+1), true},
		{fmt.Sprintf("v1.%d.0-alpha.1", minor+2), false},
		{fmt.Sprintf("v1.%d.0", minor+2), false},
	} {
		kv, err := common.ParseKubeVersion(tc.version)
		if err != nil {
			t.Fatal(err)
		}
		install := action.NewInstall(action.NewConfiguration())
		install.DryRunStrategy = action.DryRunClient
		install.ReleaseName, install.Namespace, install.KubeVersion = Release.Name, Release.Namespace, kv
		_, err = install.Run(chrt, nil)
		if tc.ok && err != nil {
			t.Errorf("Kubernetes %s: %v", tc.version, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "incompatible with Kubernetes")) {
			t.Errorf("Kubernetes %s: err %v, want the chart refused", tc.version, err)
		}
	}
}

// TestSchedulerImagePerMinor: the chart runs the dractl-scheduler image
// built for the cluster's Kubernetes minor, a provider's "38+" minor
// included, and a render for a minor without one fails with the minors
// the chart installs on.
func TestSchedulerImagePerMinor(t *testing.T) {
	const unsupported = "the chart installs on Kubernetes 1.37, 1.38"
	noTag := map[string]any{"images": map[string]any{"scheduler": map[string]any{"minorTags": map[string]any{"1.38": nil}}}}
	for _, tc := range []struct {
		name    string
		version common.KubeVersion
		values  map[string]any
		image   string // "" when the render fails with err
		err     string
	}{
		{"1.37", common.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}, nil, "dractl-scheduler:dev", ""},
		{"1.38", common.KubeVersion{Version: "v1.38.0", Major: "1", Minor: "38"}, nil, "dractl-scheduler:dev-1.38", ""},
		{"1.38 of a provider", common.KubeVersion{Version: "v1.38.1-gke.1200", Major: "1", Minor: "38+"}, nil, "dractl-scheduler:dev-1.38", ""},
		{"1.38 with a tag of its own", common.KubeVersion{Version: "v1.38.0", Major: "1", Minor: "38"},
			map[string]any{"images": map[string]any{"scheduler": map[string]any{"repository": "registry.example/dractl-scheduler", "minorTags": map[string]any{"1.38": "v0.4.0-k8s1.38"}}}},
			"registry.example/dractl-scheduler:v0.4.0-k8s1.38", ""},
		{"1.36", common.KubeVersion{Version: "v1.36.5", Major: "1", Minor: "36"}, nil, "",
			"dractl-scheduler: no image for Kubernetes 1.36 (v1.36.5); " + unsupported},
		{"1.39", common.KubeVersion{Version: "v1.39.0", Major: "1", Minor: "39"}, nil, "",
			"dractl-scheduler: no image for Kubernetes 1.39 (v1.39.0); " + unsupported},
		{"1.38 without its tag", common.KubeVersion{Version: "v1.38.0", Major: "1", Minor: "38"}, noTag, "",
			"images.scheduler.minorTags: no tag for Kubernetes 1.38"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := RenderFor(repo, tc.values, tc.version)
			if tc.image == "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("render for %s: %v; want %q", tc.version.Version, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var images []string
			for _, line := range strings.Split(out["scheduler/deployment.yaml"], "\n") {
				if img, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
					images = append(images, img)
				}
			}
			if !slices.Equal(images, []string{tc.image}) {
				t.Errorf("scheduler images for %s: %v, want [%s]", tc.version.Version, images, tc.image)
			}
		})
	}
}
