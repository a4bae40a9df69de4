package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/docs"
	"github.com/dractl/dractl/e2e/framework"
)

// TestEveryMetricServed walks the table of docs/metrics.md and reads each
// metric from its component's live endpoint: dractl-gpu-driver's
// /metrics behind delegated authentication and authorization (a stranger
// is refused, a scraper with get on /metrics is served), dractl-scheduler's
// /metrics (kube-scheduler's registry) and dractl monitor's, while a pod's
// MIG claim is scheduled, prepared and running, one GPU is unhealthy and
// another driver's pool is invalid.
// A family missing from its page, or without a series, fails; so does a
// row of a component the test does not know.
func TestEveryMetricServed(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{Components: []framework.Component{framework.ResourceClaimController{}}})
	sa := cp.ServiceAccount(t, "kube-system", "dractl-scheduler")
	cp.Apply(t, rbac)
	var schedulerAddr string
	cp.Start(framework.Scheduler{ConfigFile: twoProfiles, Client: sa, Address: &schedulerAddr})

	driverAddr := freeAddress(t)
	// What the driver's identity needs to have kube-apiserver review the
	// scrapes, and a scraper's role.
	ctx := cp.Context()
	rb := cp.Client.RbacV1()
	driverSA := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "dractl-gpu-driver", Name: "dractl-gpu-driver"}}
	for _, err := range []error{
		create(rb.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "driver-auth-delegator"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"}, Subjects: driverSA}, metav1.CreateOptions{})),
		create(rb.RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "driver-auth-reader"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"}, Subjects: driverSA}, metav1.CreateOptions{})),
		create(rb.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})),
		create(rb.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}}}, metav1.CreateOptions{})),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	scraper := cp.ServiceAccount(t, "monitoring", "prometheus").BearerToken
	stranger := cp.ServiceAccount(t, "monitoring", "stranger").BearerToken
	n := healthNode(t, cp, "--metrics-bind-address", driverAddr, "--metrics-auth")

	monitorAddr := freeAddress(t)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan result, 1)
	go func() {
		done <- dractlContext(mctx, cp.Kubeconfig(nil), "monitor", "--leader-elect=false", "--metrics-bind-address", monitorAddr)
	}()
	t.Cleanup(func() {
		cancel()
		if r := <-done; r.code != 0 {
			t.Errorf("monitor exited %d: %s", r.code, r.err)
		}
	})

	// A pool of another driver with a device published twice: invalid.
	c, d := gpuSlices("dup", "gpu-node", 3)
	extra := d.DeepCopy()
	extra.Name, extra.Spec.Devices = "dup-extra", extra.Spec.Devices[:1]
	for _, s := range []*resourcev1.ResourceSlice{c, d, extra} {
		if _, err := cp.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	createTemplate(t, cp, "mig-1g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", "mig-1g-5gb.dractl.dev", 1)}})
	createClaimPod(t, cp, "trainer", dractlProfile, "mig-1g", "")
	running(t, cp, "trainer")
	if err := os.MkdirAll(filepath.Join(n.stateDir, "gpus", "unhealthy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.stateDir, "gpus", "unhealthy", "1"), []byte("XID 48"), 0o644); err != nil {
		t.Fatal(err)
	}

	base := map[string]string{
		"driver":    "https://" + driverAddr + "/metrics",
		"scheduler": "https://" + schedulerAddr + "/metrics",
		"monitor":   "http://" + monitorAddr + "/metrics",
	}
	eventually(t, "the driver to refuse a stranger's scrape", func(context.Context) (bool, error) {
		code, body := scrape(base["driver"], stranger)
		return code == http.StatusForbidden, fmt.Errorf("%d %s", code, body)
	})
	// The pages once what the test did shows in them: the GPU's
	// unhealthy event counted, the trainer's claim prepared and written.
	pages := map[string]string{}
	for component, want := range map[string]string{
		"driver":    `dractl_driver_health_events_total{driver="gpu.dractl.dev",event="unhealthy"}`,
		"scheduler": `dractl_scheduler_allocation_outcomes_total{claim_kind="pod",outcome="written",profile="dractl"}`,
		"monitor":   `dractl_pool_validation_errors{driver="gpu.example.com",pool="dup",reason="FieldValueDuplicate"}`,
	} {
		token := ""
		if component == "driver" {
			token = scraper
		}
		eventually(t, component+"'s page to count what the test did", func(context.Context) (bool, error) {
			code, body := scrape(base[component], token)
			pages[component] = body
			v, ok := sample(body, want)
			return code == http.StatusOK && ok && v > 0, fmt.Errorf("%d, %s = %v", code, want, v)
		})
	}
	if v, _ := sample(pages["driver"], `dractl_driver_operation_duration_seconds_count{driver="gpu.dractl.dev",operation="prepare"}`); v < 1 {
		t.Errorf("no prepare timed on the driver's page")
	}
	if v, _ := sample(pages["driver"], `dractl_driver_prepared_claims{driver="gpu.dractl.dev"}`); v != 1 {
		t.Errorf("prepared claims %v, want the trainer's", v)
	}
	eventually(t, "the monitor to count the tainted GPU's devices", func(context.Context) (bool, error) {
		_, body := scrape(base["monitor"], "")
		v, _ := sample(body, `dractl_pool_devices_tainted{driver="gpu.dractl.dev",pool="gpu-node"}`)
		return v > 0, fmt.Errorf("%v tainted", v)
	})

	rows, err := docs.MetricRows(filepath.Join(repo, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("docs/metrics.md: no metrics table")
	}
	for _, r := range rows {
		component, name := r[0], r[1]
		page, ok := pages[component]
		if !ok {
			t.Errorf("docs/metrics.md: %s is served by %q, which this test does not scrape", name, component)
			continue
		}
		if !strings.Contains(page, "\n# TYPE "+name+" ") {
			t.Errorf("%s's /metrics does not serve %s", component, name)
			continue
		}
		if !strings.Contains(page, "\n"+name+"{") && !strings.Contains(page, "\n"+name+" ") && !strings.Contains(page, "\n"+name+"_count{") {
			t.Errorf("%s's /metrics serves %s without a series", component, name)
		}
	}
}

// create drops the object of a create call.
func create[T any](_ T, err error) error { return err }

// sample finds the value of one series (name{labels} as the text format
// writes it) in a metrics page.
func sample(page, series string) (float64, bool) {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}
