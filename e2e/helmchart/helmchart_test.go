package helmchart

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
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

// podTemplates are the pod templates of the Deployments and DaemonSets
// rendered, by "Kind name".
func podTemplates(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		out[o.GetKind()+" "+o.GetName()] = spec
	}
	return out
}

// containerOf is the one container of a pod template.
func containerOf(t *testing.T, name string, spec map[string]any) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(spec, "containers")
	if len(cs) != 1 {
		t.Fatalf("%s: %d containers", name, len(cs))
	}
	return cs[0].(map[string]any)
}

func envOf(c map[string]any) map[string]string {
	env := map[string]string{}
	list, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range list {
		m := e.(map[string]any)
		v, _ := m["value"].(string)
		env[m["name"].(string)] = v
	}
	return env
}

// mounts are a container's volume mounts, path → volume, and the pod's
// hostPath volumes, volume → host path and type.
func mounts(c, spec map[string]any) (byPath map[string]string, hostPaths map[string][2]string) {
	byPath, hostPaths = map[string]string{}, map[string][2]string{}
	ms, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	for _, m := range ms {
		mm := m.(map[string]any)
		byPath[mm["mountPath"].(string)] = mm["name"].(string)
	}
	vs, _, _ := unstructured.NestedSlice(spec, "volumes")
	for _, v := range vs {
		vm := v.(map[string]any)
		if hp, ok := vm["hostPath"].(map[string]any); ok {
			typ, _ := hp["type"].(string)
			hostPaths[vm["name"].(string)] = [2]string{hp["path"].(string), typ}
		}
	}
	return byPath, hostPaths
}

// TestNodeValues: the values for where the chart's pods run (hostNetwork,
// apiServer, the scheduler's port, the driver's node directories) change
// exactly what they name, and their defaults render none of it: every
// pod on the cluster's network, in-cluster clients at the kubernetes
// Service, the driver's directories the kubelet's and the runtime's
// defaults, each mounted at its path on the node.
func TestNodeValues(t *testing.T) {
	node := map[string]any{
		"hostNetwork": true,
		"apiServer":   map[string]any{"host": "198.51.100.7", "port": 6443},
		"scheduler":   map[string]any{"securePort": 20259},
		"driver": map[string]any{"kubeletRootDir": "/srv/node/kubelet", "cdiDir": "/srv/node/run/cdi", "stateDir": "/srv/node/dractl",
			"nvml": map[string]any{"library": "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1"}},
		"publisher": map[string]any{"enabled": true, "driverName": "nic.acme.test", "pools": "kind: ResourceSlice\n"},
	}
	dirs := map[string]string{"kubelet": "/var/lib/kubelet", "cdi": "/var/run/cdi", "state": "/var/lib/dractl-gpu-driver"}
	for _, tc := range []struct {
		name   string
		values map[string]any
		// apiServer is KUBERNETES_SERVICE_HOST:PORT, "" for none.
		host, apiServer string
		schedPort       int64
		dirs            map[string]string
	}{
		{name: "defaults", values: map[string]any{"publisher": node["publisher"]}, schedPort: 10259, dirs: dirs},
		{name: "one node's", values: node, host: "true", apiServer: "198.51.100.7:6443", schedPort: 20259,
			dirs: map[string]string{"kubelet": "/srv/node/kubelet", "cdi": "/srv/node/run/cdi", "state": "/srv/node/dractl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := podTemplates(objects(t, tc.values))
			if len(pods) != 5 {
				t.Fatalf("pod templates %v, want the scheduler's, the monitor's, two drivers' and the publisher's", slices.Sorted(maps.Keys(pods)))
			}
			for name, spec := range pods {
				if hn, _ := spec["hostNetwork"].(bool); fmt.Sprint(hn) != map[string]string{"": "false", "true": "true"}[tc.host] {
					t.Errorf("%s: hostNetwork %v", name, spec["hostNetwork"])
				}
				env := envOf(containerOf(t, name, spec))
				got := ""
				if h, ok := env["KUBERNETES_SERVICE_HOST"]; ok {
					got = h + ":" + env["KUBERNETES_SERVICE_PORT"]
				}
				if got != tc.apiServer {
					t.Errorf("%s: kube-apiserver at %q, want %q", name, got, tc.apiServer)
				}
			}
			sched := containerOf(t, "scheduler", pods["Deployment dractl-scheduler"])
			a, _, _ := unstructured.NestedStringSlice(sched, "args")
			ports, _, _ := unstructured.NestedSlice(sched, "ports")
			// Decoded as JSON: numbers are float64.
			port := int64(ports[0].(map[string]any)["containerPort"].(float64))
			flag := slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--secure-port") })
			if port != tc.schedPort || flag != (tc.schedPort != 10259) || (flag && !slices.Contains(a, fmt.Sprintf("--secure-port=%d", tc.schedPort))) {
				t.Errorf("scheduler: port %d, args %q; want %d", port, a, tc.schedPort)
			}
			root := tc.dirs["kubelet"]
			for _, ds := range []string{"DaemonSet dractl-gpu-driver", "DaemonSet dractl-gpu-driver-nvml"} {
				spec := pods[ds]
				c := containerOf(t, ds, spec)
				byPath, hostPaths := mounts(c, spec)
				for path, vol := range map[string]string{root + "/plugins_registry": "plugins-registry", root + "/plugins": "plugins", tc.dirs["cdi"]: "cdi", tc.dirs["state"]: "state"} {
					if byPath[path] != vol || hostPaths[vol] != [2]string{path, "DirectoryOrCreate"} {
						t.Errorf("%s: volume %s mounted at %v from %v, want %s at its path on the node", ds, vol, byPath, hostPaths[vol], path)
					}
				}
				args, _, _ := unstructured.NestedStringSlice(c, "args")
				want := []string{"--state-dir=" + tc.dirs["state"], "--cdi-dir=" + tc.dirs["cdi"]}
				if root != dirs["kubelet"] {
					want = append(want, "--registrar-dir="+root+"/plugins_registry", "--plugin-dir="+root+"/plugins/gpu.dractl.dev")
				}
				for _, w := range want {
					if !slices.Contains(args, w) {
						t.Errorf("%s: args %q lack %s", ds, args, w)
					}
				}
				if n := len(slices.DeleteFunc(slices.Clone(args), func(s string) bool {
					return !strings.HasPrefix(s, "--registrar-dir") && !strings.HasPrefix(s, "--plugin-dir")
				})); root == dirs["kubelet"] && n != 0 {
					t.Errorf("%s: args %q name the kubelet's default directories", ds, args)
				}
			}
		})
	}
	if _, err := Render(repo, map[string]any{"apiServer": map[string]any{"host": "198.51.100.7", "port": 0}}); err == nil || !strings.Contains(err.Error(), "apiServer.port") {
		t.Errorf("apiServer.host without a port: err %v", err)
	}
}

// TestNVMLLibraryAlone: the NVML driver's LD_LIBRARY_PATH is a directory
// holding only the host's NVML library, mounted as a file
// (driver.nvml.library): no other file of the host's is on the image
// loader's path, so the image's C library, not the host's, is loaded.
func TestNVMLLibraryAlone(t *testing.T) {
	for _, lib := range []string{"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1"} {
		var values map[string]any
		if !strings.HasPrefix(lib, "/usr/lib/x86_64-linux-gnu/") {
			values = map[string]any{"driver": map[string]any{"nvml": map[string]any{"library": lib}}}
		}
		spec := podTemplates(objects(t, values))["DaemonSet dractl-gpu-driver-nvml"]
		c := containerOf(t, "nvml", spec)
		dir := envOf(c)["LD_LIBRARY_PATH"]
		if dir == "" || strings.Contains(dir, ":") {
			t.Fatalf("LD_LIBRARY_PATH %q, want one directory", dir)
		}
		byPath, hostPaths := mounts(c, spec)
		var under []string
		for path := range byPath {
			if path == dir || strings.HasPrefix(path, dir+"/") || strings.HasPrefix(dir, path+"/") {
				under = append(under, path)
			}
		}
		want := dir + "/libnvidia-ml.so.1"
		if !slices.Equal(under, []string{want}) {
			t.Fatalf("mounts on LD_LIBRARY_PATH %s: %q, want %s alone", dir, under, want)
		}
		if got := hostPaths[byPath[want]]; got != [2]string{lib, "File"} {
			t.Errorf("%s comes from %v, want the file %s", want, got, lib)
		}
	}
}
