package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/e2e/framework"
)

// TestMonitorMetricsAuth runs `dractl monitor --metrics-auth` as deploy/
// runs it, with the credentials and RBAC of its ServiceAccount only, and
// scrapes /metrics as strangers and as a scraper bound to the role
// deploy/monitor ships for scrapers: kube-apiserver authenticates each
// request (TokenReview) and authorizes it (SubjectAccessReview).
func TestMonitorMetricsAuth(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	cp.Apply(t, filepath.Join(repo, "deploy", "monitor"))
	kubeconfig := cp.Kubeconfig(cp.ServiceAccount(t, "dractl-system", "dractl-monitor"))

	addr := freeAddress(t)
	ctx, cancel := context.WithCancel(cp.Context())
	done := make(chan result, 1)
	go func() {
		done <- dractlContext(ctx, kubeconfig, "monitor", "--metrics-auth", "--metrics-bind-address", addr,
			"--leader-elect-namespace", "dractl-system")
	}()
	t.Cleanup(func() {
		cancel()
		if r := <-done; r.code != 0 {
			t.Errorf("monitor exited %d: %s", r.code, r.err)
		}
	})
	base := "https://" + addr
	eventually(t, "the monitor to be ready over HTTPS without credentials", func(context.Context) (bool, error) {
		code, body := scrape(base+"/readyz", "")
		return code == http.StatusOK, fmt.Errorf("/readyz: %d %s", code, body)
	})

	scraper := func(name string) string {
		cfg := cp.ServiceAccount(t, "monitoring", name)
		return cfg.BearerToken
	}
	allowed := scraper("prometheus")
	bindings := cp.Client.RbacV1().ClusterRoleBindings()
	if _, err := bindings.Create(cp.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-dractl-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "dractl-monitor-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, path, token string
		want              []int
	}{
		// Anonymous requests are authenticated as system:anonymous and
		// then refused by authorization.
		{"no credentials", "/metrics", "", []int{http.StatusUnauthorized, http.StatusForbidden}},
		{"a token kube-apiserver did not issue", "/metrics", "not-a-token", []int{http.StatusUnauthorized}},
		{"a ServiceAccount without the role", "/metrics", scraper("stranger"), []int{http.StatusForbidden}},
		{"the monitor's own ServiceAccount", "/metrics", cp.ServiceAccount(t, "dractl-system", "dractl-monitor").BearerToken, []int{http.StatusForbidden}},
		{"a scraper with get on /metrics", "/metrics", allowed, []int{http.StatusOK}},
		{"the liveness probe", "/healthz", "", []int{http.StatusOK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The binding reaches the authorizer's cache within a moment.
			eventually(t, tc.name, func(context.Context) (bool, error) {
				code, body := scrape(base+tc.path, tc.token)
				for _, w := range tc.want {
					if code == w {
						if code == http.StatusOK && tc.path == "/metrics" && !strings.Contains(body, "dractl_pools") {
							return false, fmt.Errorf("/metrics without dractl_pools:\n%s", body)
						}
						return true, nil
					}
				}
				return false, fmt.Errorf("%s: %d, want one of %v: %s", tc.path, code, tc.want, body)
			})
		})
	}
	// A refused scrape is refused for good, not for a moment.
	if code, _ := scrape(base+"/metrics", scraper("stranger")); code != http.StatusForbidden {
		t.Errorf("a stranger's second scrape: %d", code)
	}
	// The self-signed certificate lives in memory: deploy/ runs the
	// monitor on a read-only root file system.
	if _, err := os.Stat("apiserver.local.config"); err == nil {
		t.Error("the monitor wrote its certificate into the working directory")
	}
}

// scrape GETs url over TLS (the monitor's certificate is self-signed),
// with a bearer token when one is given.
func scrape(url, token string) (int, string) {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
