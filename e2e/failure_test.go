package e2e

import (
	"net"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/e2e/framework"
)

// TestForbiddenNamesVerbAndResource runs the live verbs as a
// ServiceAccount that may read claims, nodes and pods but not
// ResourceSlices: each fails with exit 2 and a message naming what it was
// not allowed to do.
func TestForbiddenNamesVerbAndResource(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	ctx := cp.Context()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "dra-reader-without-slices"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims", "deviceclasses", "resourceclaimtemplates"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list"}},
		},
	}
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: "viewer"}},
	}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	publish(t, cp, "gpu-partitions")
	kc := cp.Kubeconfig(cp.ServiceAccount(t, "default", "viewer"))
	for _, args := range [][]string{
		{"get", "pools"},
		{"describe", "node", "my-node"},
		{"validate", "--live"},
		{"snapshot", t.TempDir()},
	} {
		r := dractl(t, kc, args...)
		want := `error: cannot list resourceslices.resource.k8s.io: resourceslices.resource.k8s.io is forbidden: User "system:serviceaccount:default:viewer" cannot list resource "resourceslices" in API group "resource.k8s.io" at the cluster scope`
		if r.code != 2 || !strings.HasPrefix(r.err, want) || r.out != "" {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s\nwant exit 2 and %s", args, r.code, r.out, r.err, want)
		}
	}
	// What the account may read still works.
	if r := dractl(t, kc, "explain", "pod/nobody"); r.code != 2 || !strings.Contains(r.err, `cannot get pods default/nobody: pods "nobody" not found`) {
		t.Errorf("explain pod/nobody: exit %d: %s", r.code, r.err)
	}
}

// TestAPIServerDown stops kube-apiserver under a valid kubeconfig, and
// points dractl at a server that accepts connections and never answers:
// both fail with exit 2 and say which server, instead of hanging.
func TestAPIServerDown(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	kc := cp.Kubeconfig(nil)
	if r := dractl(t, kc, "get", "pools"); r.code != 0 {
		t.Fatalf("get pools before the stop: exit %d: %s", r.code, r.err)
	}
	cp.Stop()
	for _, args := range [][]string{{"get", "pools"}, {"describe", "node", "n"}, {"explain", "pod/p"}, {"validate", "--live"}} {
		r := dractl(t, kc, args...)
		if r.code != 2 || !strings.Contains(r.err, "cannot be reached") || !strings.Contains(r.err, "connection refused") {
			t.Errorf("%v against a stopped apiserver: exit %d\n%s", args, r.code, r.err)
		}
	}

	// A server that accepts and never answers: --request-timeout bounds
	// every request.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	r := dractl(t, "", "get", "pools", "--server", "https://"+l.Addr().String(), "--insecure-skip-tls-verify", "--request-timeout", "1s")
	if r.code != 2 || !strings.Contains(r.err, "cannot list resourceslices.resource.k8s.io: the API server at https://"+l.Addr().String()+" cannot be reached") {
		t.Errorf("get pools against a silent server: exit %d\n%s", r.code, r.err)
	}
}
