package helmchart

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const repo = "../.."

// TestManifestsUpToDate: deploy/{scheduler,monitor,driver} is the chart
// rendered with its default values, byte for byte, and holds nothing else.
func TestManifestsUpToDate(t *testing.T) {
	files, err := Manifests(repo)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(repo, rel))
		if err != nil {
			t.Errorf("%s: %v (run make manifests)", rel, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the chart's rendering (run make manifests)", rel)
		}
	}
	stale, err := Stale(repo, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Errorf("deploy/ has manifests the chart does not make: %s", strings.Join(stale, ", "))
	}
}

// TestLint: `helm lint --strict` finds nothing above informational, with
// the defaults and with every switch turned the other way.
func TestLint(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults": nil,
		"everything off but the scheduler, in place of kube-scheduler with two profiles, three replicas": {
			"scheduler": map[string]any{"replicas": 3, "profile": "config-two-profiles.yaml", "replaceKubeScheduler": true},
			"monitor":   map[string]any{"enabled": false},
			"driver":    map[string]any{"mock": map[string]any{"enabled": false}, "nvml": map[string]any{"enabled": false}, "deviceClasses": false},
			"publisher": map[string]any{"enabled": false},
		},
		"one monitor without metrics auth": {"monitor": map[string]any{"replicas": 1, "metrics": map[string]any{"auth": false}}},
		"drivers without the node policy":  {"driver": map[string]any{"nodeScopedSlices": false}},
		"the publisher":                    {"publisher": map[string]any{"enabled": true, "driverName": "nic.acme.test", "pools": "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: nics\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			if msgs := Lint(repo, values); len(msgs) > 0 {
				t.Errorf("helm lint:\n%s", strings.Join(msgs, "\n"))
			}
		})
	}
	// The linter parses what the templates render: a value that breaks
	// a manifest is a finding.
	if msgs := Lint(repo, map[string]any{"images": map[string]any{"pullPolicy": "Always: [never"}}); len(msgs) == 0 {
		t.Error("helm lint accepts a manifest that is not YAML")
	}
}

// objects renders the chart with values and decodes every object.
func objects(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	rendered, err := Render(repo, values)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for name, text := range rendered {
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
				t.Fatalf("%s: an object without apiVersion, kind or name: %v", name, obj.Object)
			}
			out = append(out, obj)
		}
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func args(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%s %s: %d containers", o.GetKind(), o.GetName(), len(cs))
	}
	a, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return a
}

// TestValues: what each value changes in the rendered objects.
func TestValues(t *testing.T) {
	t.Run("defaults: two monitors electing, metrics behind auth", func(t *testing.T) {
		objs := objects(t, nil)
		m := find(objs, "Deployment", "dractl-monitor")
		if a := strings.Join(args(t, m), " "); !strings.Contains(a, "--metrics-auth") || !strings.Contains(a, "--leader-elect-namespace=dractl-system") {
			t.Errorf("monitor args %q", a)
		}
		for _, want := range [][2]string{{"Role", "dractl-monitor-leader-election"}, {"ClusterRoleBinding", "dractl-monitor-auth-delegator"},
			{"ClusterRole", "dractl-monitor-metrics-reader"}, {"Namespace", "dractl-gpu-driver"}, {"DaemonSet", "dractl-gpu-driver"},
			{"DaemonSet", "dractl-gpu-driver-nvml"}, {"DeviceClass", "mig-1g-5gb.dractl.dev"}} {
			if find(objs, want[0], want[1]) == nil {
				t.Errorf("no %s %s", want[0], want[1])
			}
		}
		seen := map[string]bool{}
		for _, o := range objs {
			key := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
			if seen[key] {
				t.Errorf("%s rendered twice: helm install would fail", key)
			}
			seen[key] = true
		}
	})
	t.Run("defaults, the publisher on: every controller two replicas, spread over nodes", func(t *testing.T) {
		objs := objects(t, map[string]any{"publisher": map[string]any{"enabled": true, "driverName": "nic.acme.test", "pools": "kind: ResourceSlice\n"}})
		for _, name := range []string{"dractl-scheduler", "dractl-monitor", "dractl-pool-publisher"} {
			d := find(objs, "Deployment", name)
			if d == nil {
				t.Errorf("no Deployment %s", name)
				continue
			}
			if r := replicas(d); r != "2" {
				t.Errorf("%s: replicas %s, want 2 (a leader and a standby)", name, r)
			}
			labels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
			terms, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
			if len(terms) != 1 {
				t.Errorf("%s: %d preferred anti-affinity terms, want 1", name, len(terms))
				continue
			}
			key, _, _ := unstructured.NestedString(terms[0].(map[string]any), "podAffinityTerm", "topologyKey")
			match, _, _ := unstructured.NestedStringMap(terms[0].(map[string]any), "podAffinityTerm", "labelSelector", "matchLabels")
			if key != "kubernetes.io/hostname" || len(match) == 0 || !maps.Equal(match, labels) {
				t.Errorf("%s: anti-affinity over %q for %v, want kubernetes.io/hostname for its own pods %v", name, key, match, labels)
			}
		}
	})
	t.Run("one monitor: no election, no Lease role; no auth: plain HTTP", func(t *testing.T) {
		objs := objects(t, map[string]any{"monitor": map[string]any{"replicas": 1, "metrics": map[string]any{"auth": false, "port": 9090}}})
		m := find(objs, "Deployment", "dractl-monitor")
		a := strings.Join(args(t, m), " ")
		if !strings.Contains(a, "--leader-elect=false") || strings.Contains(a, "--leader-elect-namespace") || strings.Contains(a, "--metrics-auth") ||
			!strings.Contains(a, "--metrics-bind-address=:9090") {
			t.Errorf("monitor args %q", a)
		}
		if r := replicas(m); r != "1" {
			t.Errorf("replicas %s", r)
		}
		for _, gone := range [][2]string{{"Role", "dractl-monitor-leader-election"}, {"ClusterRoleBinding", "dractl-monitor-auth-delegator"},
			{"RoleBinding", "dractl-monitor-extension-apiserver-authentication-reader"}} {
			if find(objs, gone[0], gone[1]) != nil {
				t.Errorf("%s %s rendered", gone[0], gone[1])
			}
		}
		cs, _, _ := unstructured.NestedSlice(m.Object, "spec", "template", "spec", "containers")
		scheme, _, _ := unstructured.NestedString(cs[0].(map[string]any), "livenessProbe", "httpGet", "scheme")
		if scheme != "HTTP" {
			t.Errorf("probe scheme %q", scheme)
		}
	})
	t.Run("the two-profile scheduler configuration, images, replicas", func(t *testing.T) {
		objs := objects(t, map[string]any{
			"scheduler": map[string]any{"profile": "config-two-profiles.yaml", "replaceKubeScheduler": true, "replicas": 3},
			"images":    map[string]any{"scheduler": map[string]any{"repository": "registry.example/dractl-scheduler", "tag": "v1"}},
		})
		cm := find(objs, "ConfigMap", "dractl-scheduler-config")
		cfg, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
		two, err := os.ReadFile(filepath.Join(repo, ChartDir, "files", "scheduler", "config-two-profiles.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg != string(two) {
			t.Errorf("ConfigMap config.yaml is not config-two-profiles.yaml:\n%s", cfg)
		}
		d := find(objs, "Deployment", "dractl-scheduler")
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		if img, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image"); img != "registry.example/dractl-scheduler:v1" {
			t.Errorf("image %q", img)
		}
		if r := replicas(d); r != "3" {
			t.Errorf("replicas %s", r)
		}
		def := find(objects(t, nil), "Deployment", "dractl-scheduler")
		if a, b := podAnnotations(d), podAnnotations(def); a["dractl.dev/config-sha256"] == "" || a["dractl.dev/config-sha256"] == b["dractl.dev/config-sha256"] {
			t.Errorf("a changed configuration keeps the checksum %q: the scheduler would not roll", a["dractl.dev/config-sha256"])
		}
	})
	t.Run("an unknown profile is an error", func(t *testing.T) {
		if _, err := Render(repo, map[string]any{"scheduler": map[string]any{"profile": "nope.yaml"}}); err == nil || !strings.Contains(err.Error(), "files/scheduler/nope.yaml") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("the driver's slices are scoped to its node unless turned off, and only with a driver", func(t *testing.T) {
		const policy = "dractl-gpu-driver-node-slices"
		for _, tc := range []struct {
			name   string
			values map[string]any
			want   bool
		}{
			{"defaults", nil, true},
			{"the NVML driver alone", map[string]any{"driver": map[string]any{"mock": map[string]any{"enabled": false}}}, true},
			{"nodeScopedSlices off", map[string]any{"driver": map[string]any{"nodeScopedSlices": false}}, false},
			{"no driver", map[string]any{"driver": map[string]any{"mock": map[string]any{"enabled": false}, "nvml": map[string]any{"enabled": false}}}, false},
		} {
			objs := objects(t, tc.values)
			p, b := find(objs, "ValidatingAdmissionPolicy", policy), find(objs, "ValidatingAdmissionPolicyBinding", policy)
			if (p != nil) != tc.want || (b != nil) != tc.want {
				t.Errorf("%s: policy rendered %t, binding %t, want %t", tc.name, p != nil, b != nil, tc.want)
			}
			if b != nil {
				if name, _, _ := unstructured.NestedString(b.Object, "spec", "policyName"); name != policy {
					t.Errorf("%s: the binding names policy %q", tc.name, name)
				}
			}
		}
	})
	t.Run("the publisher alone keeps its namespace", func(t *testing.T) {
		objs := objects(t, map[string]any{"driver": map[string]any{"mock": map[string]any{"enabled": false}, "nvml": map[string]any{"enabled": false}},
			"publisher": map[string]any{"enabled": true, "driverName": "nic.acme.test", "pools": "kind: ResourceSlice\n"}})
		if find(objs, "Namespace", "dractl-gpu-driver") == nil || find(objs, "ServiceAccount", "dractl-gpu-driver") != nil {
			t.Error("want the namespace without the driver's ServiceAccount")
		}
	})
}

func replicas(o *unstructured.Unstructured) string {
	r, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
	return fmt.Sprint(r)
}

func podAnnotations(o *unstructured.Unstructured) map[string]string {
	a, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "annotations")
	return a
}

// TestRBACHasNoWildcards: no rule of any Role or ClusterRole the chart
// makes grants "*" (verbs, resources, API groups or URLs).
func TestRBACHasNoWildcards(t *testing.T) {
	rules := 0
	for _, o := range objects(t, nil) {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		rs, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for i, r := range rs {
			rules++
			for _, field := range []string{"verbs", "resources", "apiGroups", "nonResourceURLs", "resourceNames"} {
				vals, _, _ := unstructured.NestedStringSlice(r.(map[string]any), field)
				for _, v := range vals {
					if strings.Contains(v, "*") {
						t.Errorf("%s %s rules[%d].%s: %q", o.GetKind(), o.GetName(), i, field, v)
					}
				}
			}
		}
	}
	if rules == 0 {
		t.Fatal("no rules rendered")
	}
}
