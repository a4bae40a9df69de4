package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/e2e/helmchart"
	"github.com/dractl/dractl/pkg/ops/monitor"
)

// A deploy/ component: who it is and the chart template that holds its
// RBAC.
type component struct {
	name, namespace, account, template string
}

var components = []component{
	{"dractl-scheduler", "kube-system", "dractl-scheduler", "scheduler/rbac.yaml"},
	{"monitor", "dractl-system", "dractl-monitor", "monitor/10-rbac.yaml"},
	{"GPU driver", "dractl-gpu-driver", "dractl-gpu-driver", "driver/rbac.yaml"},
	{"pool publisher", publisherNS, publisherAccount, "driver/controlplane-rbac.yaml"},
}

func (c component) user() string {
	return "system:serviceaccount:" + c.namespace + ":" + c.account
}

// unexercised are permissions this run cannot use although the component
// needs them, each with the reason and the test that covers the path.
// An entry the run did use is an error: the table only shrinks.
var unexercised = map[string]string{
	"GPU driver: create events":                                       "only a pool description the driver refuses is an Event on its Node (driverkit's TestStartRefusesInvalidPoolWithEvent); the mock backend's flags always describe a valid pool",
	"dractl-scheduler: update resource.k8s.io/resourceclaims/binding": "kube-apiserver checks it itself when the scheduler writes a claim's allocation (granular claim status authorization): no request names the subresource",
	"monitor: patch events.k8s.io/events":                             "the events.k8s.io recorder patches an Event that recurs into a series; the run makes none recur",
}

// TestLeastPrivilege installs the Helm chart and runs every deploy/
// component at once, each with the credentials of its ServiceAccount (a
// TokenRequest token) and exactly the RBAC the chart installed, through a representative run: a pod
// with a MIG claim scheduled by dractl-scheduler (leader-elected, as
// deploy/ runs it), prepared by the GPU
// driver through the kubelet, deleted and unprepared; a pool broken under
// the monitor; the publisher's pools published. kube-
// apiserver's audit log records every request. Then every verb on every
// resource that a Role or ClusterRole of the manifests grants must have
// been used by its component (no rule is wider than the component), and
// no request of a component may have been refused (no rule is narrower).
func TestLeastPrivilege(t *testing.T) {
	dir := t.TempDir()
	auditFlags, auditLog := auditConfig(t, dir)
	cp := framework.StartControlPlane(t, framework.Options{
		APIServerFlags: auditFlags,
		Components:     []framework.Component{framework.ResourceClaimController{}},
	})
	sa := cp.ServiceAccount(t, "kube-system", "dractl-scheduler")
	installChart(t, cp, dir)
	// A process, not framework.Scheduler: with leader election on, as
	// deploy/ runs it, kube-scheduler exits its process when it stops
	// leading. The chart's default configuration, whose Lease its RBAC
	// grants.
	sched := runSchedulerProcess(t, cp, schedulerRun{client: sa, leaderElect: true, binary: buildScheduler(t), config: besideConfig})
	t.Cleanup(func() {
		if t.Failed() {
			sched.logTail(t)
		}
	})

	// The monitor, with a pool broken under it.
	base, _ := startMonitor(t, cp, 2*time.Second)
	ctx := cp.Context()
	resourceSlices := cp.Client.ResourceV1().ResourceSlices()
	c, d := gpuSlices("dup", "node-2", 3)
	extra := d.DeepCopy()
	extra.Name = "dup-extra"
	extra.Spec.Devices = extra.Spec.Devices[:1]
	for _, s := range []*resourcev1.ResourceSlice{c, d, extra} {
		if _, err := resourceSlices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitEvent(t, cp, monitor.ReasonPoolInvalid, "dup-extra")
	waitMetric(t, base, monitor.MetricPoolCondition, `condition="invalid",driver="gpu.example.com",pool="dup"`, "1")

	// The node side: the driver prepares and unprepares a pod's claim.
	n := newGPUNode(t, cp, "gpu-node")
	n.start(t, "")
	n.registered(t)
	createTemplate(t, cp, "mig-3g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass3g, 1)}})
	createClaimPod(t, cp, "trainer", dractlProfile, "mig-3g", "")
	pod := running(t, cp, "trainer")
	claim := claimOf(t, cp, "trainer")
	n.checkPrepared(t, pod)
	deleteAndWait(t, cp, pod)
	n.checkClean(t)
	released(t, cp, claim)
	// Restarted with other GPUs, the driver republishes its pool: with
	// four, more devices than one slice holds (a slice is updated, one
	// created); with one, a slice again (one updated, one deleted).
	for _, gpus := range []int{4, 1} {
		before := n.published(t)
		n.stop(t)
		n.backend = []string{"--gpu-model", gpuModel, fmt.Sprintf("--gpus=%d", gpus)}
		n.start(t, "")
		waitFor(t, time.Minute, fmt.Sprintf("the driver to republish its pool of %d GPUs", gpus), func(ctx context.Context) (bool, error) {
			after := n.published(t)
			return len(after) != len(before), nil
		})
	}

	// The publisher: elected, it publishes its pools.
	pubSA := cp.ServiceAccount(t, publisherNS, publisherAccount)
	// Three rounds of the publisher: the example's pools, then with an
	// attribute changed (its slices updated), then under another pool
	// name (the old pool's slices deleted).
	original, err := os.ReadFile("../examples/tpu-multihost/resourceslices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.ReplaceAll(string(original), "tpu-v5-lite-podslice", "tpu-v5e")
	renamed := strings.ReplaceAll(changed, "name: tpu-pool\n", "name: tpu-pool-b\n")
	bin, kubeconfig := buildPublisher(t), cp.Kubeconfig(pubSA)
	for i, round := range []struct{ pools, pool, attr string }{
		{string(original), "tpu-pool", "tpu-v5-lite-podslice"},
		{changed, "tpu-pool", "tpu-v5e"},
		{renamed, "tpu-pool-b", "tpu-v5e"},
	} {
		file := filepath.Join(dir, fmt.Sprintf("pools-%d.yaml", i))
		if err := os.WriteFile(file, []byte(round.pools), 0o600); err != nil {
			t.Fatal(err)
		}
		pub := startPublisher(t, bin, kubeconfig, "replica-0", file)
		waitFor(t, time.Minute, fmt.Sprintf("round %d of the publisher", i), func(ctx context.Context) (bool, error) {
			list, err := resourceSlices.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			ok := false
			for _, s := range list.Items {
				if s.Spec.Driver != tpuDriver || s.Spec.NodeName != nil {
					continue
				}
				if s.Spec.Pool.Name != round.pool {
					return false, nil // the previous round's pool is still there
				}
				for _, d := range s.Spec.Devices {
					if a := d.Attributes["acceleratorType"]; a.StringValue != nil {
						ok = *a.StringValue == round.attr
					}
				}
			}
			return ok, nil
		})
		pub.stop(t)
	}
	n.stop(t)

	used := readAudit(t, auditLog)
	grants := renderedGrants(t)
	exempted := map[string]bool{}
	for _, c := range components {
		reqs := used[c.user()]
		if len(reqs) == 0 {
			t.Errorf("%s made no request as %s: the run does not exercise it", c.name, c.user())
			continue
		}
		for _, r := range reqs {
			if r.code == 403 {
				t.Errorf("%s was refused %s (%s): its RBAC lacks it", c.name, r, r.uri)
			}
		}
		rules := grants[c.template]
		if len(rules) == 0 {
			t.Errorf("%s: no rules bound to %s in %s", c.name, c.user(), c.template)
		}
		used, unused := usage(rules, reqs)
		for _, u := range used {
			if _, ok := unexercised[c.name+": "+u.permission.String()]; ok {
				t.Errorf("%s used %s, which unexercised says it cannot here: remove the entry", c.name, u.permission)
			}
		}
		for _, u := range unused {
			key := c.name + ": " + u.permission.String()
			if _, ok := unexercised[key]; ok {
				exempted[key] = true
				continue
			}
			t.Errorf("%s never used %s, granted by %s %s: trim the rule", c.name, u.permission, u.kind, u.name)
		}
		distinct := map[string]bool{}
		for _, r := range reqs {
			distinct[r.String()] = true
		}
		t.Logf("%s: %d requests, %d rules; used: %s", c.name, len(reqs), len(rules), strings.Join(slices.Sorted(maps.Keys(distinct)), "; "))
	}
	// Kubernetes' own parts act as themselves too: the kubelet as its
	// node (the Node authorizer and NodeRestriction confine it), the
	// resourceclaim controller as its ServiceAccount under its bootstrap
	// role, over kube-controller-manager's informers. Their rules are
	// Kubernetes' to trim. The Node authorizer learns from its own
	// informers which claims a node's pods use, so a kubelet that reads a
	// claim the moment its pod is bound can be refused once, and succeeds
	// when it tries again, as a real kubelet's prepare does; a refusal
	// never followed by the same request succeeding is this setup's fault.
	for _, user := range []string{"system:node:" + n.name, "system:serviceaccount:kube-system:resource-claim-controller", "system:kube-controller-manager"} {
		reqs := used[user]
		if len(reqs) == 0 {
			t.Errorf("no request as %s: it does not act as itself", user)
		}
		for _, r := range refusedForGood(reqs) {
			t.Errorf("%s was refused %s (%s)", user, r, r.uri)
		}
	}
	for key := range unexercised {
		if !exempted[key] && !t.Failed() {
			t.Errorf("unexercised lists %q, which no rule grants any more", key)
		}
	}
}

// chartValues are the values the tests install the chart with: its
// defaults, and the pool publisher (off by default: it needs a driver's
// pools) on for the pools of examples/tpu-multihost that the tests
// publish.
func chartValues(t testing.TB) map[string]any {
	t.Helper()
	pools, err := os.ReadFile("../examples/tpu-multihost/resourceslices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"publisher": map[string]any{"enabled": true, "driverName": tpuDriver, "pools": string(pools)}}
}

// installChart applies every object of the Helm chart rendered with
// chartValues, or only those of the templates named in only ("driver/
// controlplane-rbac.yaml"), as `helm install` would create them. No
// controller here runs Deployments or DaemonSets: the components run in
// this process or as its children, with the ServiceAccounts and RBAC
// installed here.
func installChart(t *testing.T, cp *framework.ControlPlane, dir string, only ...string) {
	t.Helper()
	rendered, err := helmchart.Render(repo, chartValues(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range only {
		if _, ok := rendered[name]; !ok {
			t.Fatalf("the chart renders no %s", name)
		}
	}
	if len(only) > 0 {
		maps.DeleteFunc(rendered, func(name, _ string) bool { return !slices.Contains(only, name) })
	}
	names := slices.Sorted(maps.Keys(rendered))
	// Namespaces before what lives in them.
	slices.SortStableFunc(names, func(a, b string) int {
		na, nb := strings.HasSuffix(a, "00-namespace.yaml"), strings.HasSuffix(b, "00-namespace.yaml")
		switch {
		case na && !nb:
			return -1
		case nb && !na:
			return 1
		}
		return 0
	})
	var files []string
	for i, name := range names {
		f := filepath.Join(dir, fmt.Sprintf("chart-%02d-%s", i, strings.ReplaceAll(name, "/", "-")))
		if err := os.WriteFile(f, []byte(rendered[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	cp.Apply(t, files...)
}

// auditConfig writes an audit policy into dir that records every request
// of users (of every user when none is named) at level Metadata, and
// returns kube-apiserver's flags for it and the log's path. The log is
// written before each response (blocking), so it is whole once the
// requests it should show have returned; a kube-apiserver started again
// with the same flags appends to it.
func auditConfig(t testing.TB, dir string, users ...string) (flags []string, path string) {
	t.Helper()
	policy := "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
	if len(users) > 0 {
		policy += "  users: [" + strings.Join(users, ", ") + "]\n- level: None\n"
	}
	file, path := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(file, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--audit-policy-file=" + file, "--audit-log-path=" + path, "--audit-log-mode=blocking"}, path
}

// refusedForGood are the requests of reqs that were refused (403) and
// never made again with success. A request refused and then granted
// when retried was refused by an authorizer still learning the cluster
// (the Node authorizer's graph of a pod just bound, RBAC's caches of a
// kube-apiserver just started), not for a rule the user lacks.
func refusedForGood(reqs []auditRequest) []auditRequest {
	var out []auditRequest
	for i, r := range reqs {
		if r.code == 403 && !slices.ContainsFunc(reqs[i+1:], func(later auditRequest) bool {
			return later.verb == r.verb && later.uri == r.uri && later.code < 400
		}) {
			out = append(out, r)
		}
	}
	return out
}

// granted is one permission of a grant.
type granted struct {
	grant
	permission
}

// usage splits the permissions that rules spell out into those some
// request of reqs used and those none did.
func usage(rules []grant, reqs []auditRequest) (used, unused []granted) {
	for _, g := range rules {
		for _, p := range g.permissions() {
			if slices.ContainsFunc(reqs, func(r auditRequest) bool { return g.allows(p, r) }) {
				used = append(used, granted{g, p})
			} else {
				unused = append(unused, granted{g, p})
			}
		}
	}
	return used, unused
}

// auditRequest is one request of the audit log, as RBAC sees it.
type auditRequest struct {
	verb, group, resource, namespace, name string
	uri                                    string
	code                                   int32
}

func (r auditRequest) String() string {
	return fmt.Sprintf("%s %s in %q", r.verb, groupResource(r.group, r.resource), r.namespace)
}

func groupResource(group, resource string) string {
	if group == "" {
		return resource
	}
	return group + "/" + resource
}

// readAudit returns each user's resource requests from a JSON audit log.
func readAudit(t testing.TB, path string) map[string][]auditRequest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]auditRequest{}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var ev auditv1.Event
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("audit log: %v", err)
			}
			if ev.ObjectRef != nil {
				res := ev.ObjectRef.Resource
				if ev.ObjectRef.Subresource != "" {
					res += "/" + ev.ObjectRef.Subresource
				}
				req := auditRequest{verb: ev.Verb, group: ev.ObjectRef.APIGroup, resource: res, namespace: ev.ObjectRef.Namespace,
					name: ev.ObjectRef.Name, uri: ev.RequestURI}
				if ev.ResponseStatus != nil {
					req.code = ev.ResponseStatus.Code
				}
				out[ev.User.Username] = append(out[ev.User.Username], req)
			}
		}
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// grant is one rule of a Role or ClusterRole of the manifests, where it
// applies: the namespace of the Role or RoleBinding, or the cluster ("").
type grant struct {
	kind, name, namespace string
	rule                  rbacv1.PolicyRule
}

type permission struct{ verb, group, resource string }

func (p permission) String() string { return p.verb + " " + groupResource(p.group, p.resource) }

// permissions spells the rule out verb by verb, resource by resource.
func (g grant) permissions() []permission {
	var out []permission
	for _, v := range g.rule.Verbs {
		for _, gr := range g.rule.APIGroups {
			for _, r := range g.rule.Resources {
				out = append(out, permission{v, gr, r})
			}
		}
	}
	return out
}

// allows reports whether r used permission p of this grant.
func (g grant) allows(p permission, r auditRequest) bool {
	if r.group != p.group || r.resource != p.resource {
		return false
	}
	// client-go's informers stream their initial list in a watch
	// (sendInitialEvents) where the server can, and list where it cannot
	// or the stream fails: a streamed list uses the list permission.
	if p.verb == "list" && r.verb == "watch" && strings.Contains(r.uri, "sendInitialEvents=true") {
		r.verb = "list"
	}
	if r.verb != p.verb {
		return false
	}
	if g.namespace != "" && r.namespace != g.namespace {
		return false
	}
	return len(g.rule.ResourceNames) == 0 || slices.Contains(g.rule.ResourceNames, r.name)
}

// renderedGrants renders the chart with chartValues (its defaults, what
// deploy/ is byte for byte, and the publisher) and returns, by template, the rules of the Roles and
// ClusterRoles it defines that a binding of the same template gives to a
// ServiceAccount. Roles of Kubernetes' own (system:kube-scheduler, ...)
// that the manifests bind are Kubernetes' to trim.
func renderedGrants(t testing.TB) map[string][]grant {
	t.Helper()
	rendered, err := helmchart.Render(repo, chartValues(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]grant{}
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		roles := map[string]rbacv1.Role{}
		clusterRoles := map[string]rbacv1.ClusterRole{}
		var bindings []rbacv1.RoleBinding
		var clusterBindings []rbacv1.ClusterRoleBinding
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(rendered[name]), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var into any
			switch u.GetKind() {
			case "Role":
				var r rbacv1.Role
				into = &r
			case "ClusterRole":
				var r rbacv1.ClusterRole
				into = &r
			case "RoleBinding":
				bindings = append(bindings, rbacv1.RoleBinding{})
				into = &bindings[len(bindings)-1]
			case "ClusterRoleBinding":
				clusterBindings = append(clusterBindings, rbacv1.ClusterRoleBinding{})
				into = &clusterBindings[len(clusterBindings)-1]
			default:
				continue
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
				t.Fatalf("%s: %s %s: %v", name, u.GetKind(), u.GetName(), err)
			}
			if r, ok := into.(*rbacv1.Role); ok {
				roles[r.Namespace+"/"+r.Name] = *r
			}
			if r, ok := into.(*rbacv1.ClusterRole); ok {
				clusterRoles[r.Name] = *r
			}
		}
		for _, b := range bindings {
			var rules []rbacv1.PolicyRule
			switch b.RoleRef.Kind {
			case "Role":
				rules = roles[b.Namespace+"/"+b.RoleRef.Name].Rules
			case "ClusterRole":
				rules = clusterRoles[b.RoleRef.Name].Rules
			}
			for _, r := range rules {
				out[name] = append(out[name], grant{b.RoleRef.Kind, b.RoleRef.Name, b.Namespace, r})
			}
		}
		for _, b := range clusterBindings {
			for _, r := range clusterRoles[b.RoleRef.Name].Rules {
				out[name] = append(out[name], grant{"ClusterRole", b.RoleRef.Name, "", r})
			}
		}
	}
	return out
}

// TestRefusedForGood: a refusal counts against the RBAC unless the same
// request was granted afterwards; and a permission is used only by a
// request of its verb and resource, in the grant's namespace, on one of
// its resource names.
func TestRefusedForGood(t *testing.T) {
	get := auditRequest{verb: "get", resource: "pods", namespace: "default", name: "a", uri: "/api/v1/namespaces/default/pods/a"}
	with := func(r auditRequest, code int32) auditRequest { r.code = code; return r }
	list := get
	list.verb = "list"
	for name, tc := range map[string]struct {
		reqs []auditRequest
		want int
	}{
		"refused, then granted":          {[]auditRequest{with(get, 403), with(get, 200)}, 0},
		"granted, then refused":          {[]auditRequest{with(get, 200), with(get, 403)}, 1},
		"refused, another verb granted":  {[]auditRequest{with(get, 403), with(list, 200)}, 1},
		"refused twice":                  {[]auditRequest{with(get, 403), with(get, 403)}, 2},
		"refused, then failed otherwise": {[]auditRequest{with(get, 403), with(get, 409)}, 1},
		"never refused":                  {[]auditRequest{with(get, 200), with(get, 404)}, 0},
	} {
		if got := refusedForGood(tc.reqs); len(got) != tc.want {
			t.Errorf("%s: %d refused for good, want %d", name, len(got), tc.want)
		}
	}

	rules := []grant{
		{kind: "Role", name: "r", namespace: "default", rule: rbacv1.PolicyRule{Verbs: []string{"get", "update"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"a"}}},
		{kind: "ClusterRole", name: "c", rule: rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
	}
	other := get
	other.namespace = "kube-system"
	for name, tc := range map[string]struct {
		reqs   []auditRequest
		unused []string
	}{
		"get of the named pod":        {[]auditRequest{get}, []string{"update pods", "list pods"}},
		"get of another pod":          {[]auditRequest{{verb: "get", resource: "pods", namespace: "default", name: "b"}}, []string{"get pods", "update pods", "list pods"}},
		"get in another namespace":    {[]auditRequest{other}, []string{"get pods", "update pods", "list pods"}},
		"a list anywhere":             {[]auditRequest{list, other}, []string{"get pods", "update pods"}},
		"a list streamed in a watch":  {[]auditRequest{{verb: "watch", resource: "pods", uri: "/api/v1/pods?sendInitialEvents=true&watch=true"}}, []string{"get pods", "update pods"}},
		"a watch that lists nothing":  {[]auditRequest{{verb: "watch", resource: "pods", uri: "/api/v1/pods?watch=true"}}, []string{"get pods", "update pods", "list pods"}},
		"another group's pods unused": {[]auditRequest{{verb: "list", group: "example.com", resource: "pods"}}, []string{"get pods", "update pods", "list pods"}},
	} {
		used, unused := usage(rules, tc.reqs)
		var got []string
		for _, u := range unused {
			got = append(got, u.permission.String())
		}
		if !slices.Equal(got, tc.unused) || len(used)+len(unused) != 3 {
			t.Errorf("%s: unused %q, want %q (%d used)", name, got, tc.unused, len(used))
		}
	}
}
