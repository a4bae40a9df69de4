package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ages are the AGE column's values, which change from run to run.
var ages = regexp.MustCompile(`(?m)   (\d+[smhdy])+$`)

// TestGetClaimsAndDevicesLive runs get claims and get devices against a
// cluster where dractl-gpu-driver serves a node of two A100s: a pod's MIG
// claim prepared and running, a claim no pod can get yet, one GPU tainted
// unhealthy by its driver. The tables are golden files; -w prints the row
// of a claim that appears and its changes; a user who may not list the
// claims of a namespace is told so (403) and sees no table; one who may
// not list pods gets a warning; a snapshot of the cluster read back with
// -f lists the same claims, reserved rather than prepared (a snapshot
// holds pending pods only).
func TestGetClaimsAndDevicesLive(t *testing.T) {
	cp := startScheduling(t)
	n := healthNode(t, cp)
	kc := cp.Kubeconfig(nil)
	createTemplate(t, cp, "mig-1g", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", "mig-1g-5gb.dractl.dev", 1)}})
	createTemplate(t, cp, "eight-gpus", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", "gpu.dractl.dev", 8)}})
	createClaimPod(t, cp, "trainer", dractlProfile, "mig-1g", "")
	running(t, cp, "trainer")
	createClaimPod(t, cp, "too-big", dractlProfile, "eight-gpus", "")
	waitFor(t, time.Minute, "too-big's claim", func(ctx context.Context) (bool, error) {
		l, err := cp.Client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 2, err
	})
	if err := os.MkdirAll(filepath.Join(n.stateDir, "gpus", "unhealthy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.stateDir, "gpus", "unhealthy", "1"), []byte("XID 48"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "GPU 1 tainted", func(ctx context.Context) (bool, error) {
		taints, _, err := n.nodeTaints(ctx)
		return err == nil && len(taints) > 0, err
	})
	claim := claimOf(t, cp, "trainer")
	generated := []string{"trainer-gpu", "too-big-gpu"}

	t.Run("get-claims", func(t *testing.T) {
		r := dractl(t, kc, "get", "claims", "-A")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		golden(t, "get-claims", ages.ReplaceAllString(normalize(r.out, generated...), "   <age>"))
	})

	t.Run("get-devices", func(t *testing.T) {
		r := dractl(t, kc, "get", "devices", "gpu-node", "-o", "json")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		var out struct {
			Devices []struct {
				Device, State, Health     string
				Claims, BlockedBy, Taints []string
			} `json:"devices"`
		}
		if err := json.Unmarshal([]byte(r.out), &out); err != nil {
			t.Fatal(err)
		}
		dev := claim.Status.Allocation.Devices.Results[0].Device
		held, blocked, tainted := 0, 0, 0
		for _, d := range out.Devices {
			switch {
			case d.Device == dev:
				held++
				if d.State != "allocated" || len(d.Claims) != 1 || d.Claims[0] != "default/"+claim.Name || d.Health != "healthy" {
					t.Errorf("the trainer's device: %+v, want allocated to %s and healthy (the pod's status)", d, claim.Name)
				}
			case d.State == "blocked":
				blocked++
				if len(d.BlockedBy) != 1 || d.BlockedBy[0] != "default/"+claim.Name {
					t.Errorf("%s blocked by %v, want %s", d.Device, d.BlockedBy, claim.Name)
				}
			}
			if gpuOf(d.Device) == "1" {
				tainted++
				if len(d.Taints) != 1 || d.Taints[0] != "dractl.dev/unhealthy=XID-48:NoSchedule" || d.Health != "unhealthy" {
					t.Errorf("%s: taints %v, health %s, want the driver's unhealthy taint", d.Device, d.Taints, d.Health)
				}
			}
		}
		if held != 1 || blocked == 0 || tainted != len(out.Devices)/2 {
			t.Errorf("%d devices: %d held, %d blocked, %d tainted; want 1 held, partitions overlapping it blocked, GPU 1's tainted", len(out.Devices), held, blocked, tainted)
		}
	})

	t.Run("watch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(cp.Context())
		done := make(chan result, 1)
		go func() { done <- dractlContext(ctx, kc, "get", "claims", "-w") }()
		time.Sleep(2 * time.Second) // the list printed, the watch started
		createClaimPod(t, cp, "later", dractlProfile, "mig-1g", "")
		running(t, cp, "later")
		later := claimOf(t, cp, "later")
		time.Sleep(time.Second)
		cancel()
		r := <-done
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		var states []string
		for _, line := range strings.Split(r.out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == later.Name {
				states = append(states, f[1])
			}
		}
		if len(states) == 0 || states[len(states)-1] != "prepared" || strings.Count(r.out, "NAME ") != 1 {
			t.Errorf("the watch printed %s in states %v, want it last prepared, under one header:\n%s", later.Name, states, r.out)
		}
	})

	t.Run("forbidden", func(t *testing.T) {
		stranger := cp.Kubeconfig(cp.ServiceAccount(t, "default", "stranger"))
		r := dractl(t, stranger, "get", "claims", "-n", "default")
		if r.code != 2 || r.out != "" || !strings.Contains(r.err, "403 Forbidden") || !strings.Contains(r.err, "cannot list resourceclaims.resource.k8s.io") {
			t.Errorf("a user who may not list claims: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
		}
		// A user who may list claims but not pods.
		rb := cp.Client.RbacV1()
		if _, err := rb.Roles("default").Create(cp.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "claims-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := rb.RoleBindings("default").Create(cp.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claims-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "claims-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "reader"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		reader := cp.Kubeconfig(cp.ServiceAccount(t, "default", "reader"))
		eventually(t, "claims listed without pods", func(context.Context) (bool, error) {
			r := dractl(t, reader, "get", "claims", "-n", "default")
			return r.code == 0 && strings.Contains(r.out, claim.Name) && strings.Contains(r.err, "warning: cannot list pods"),
				fmt.Errorf("exit %d\n%s%s", r.code, r.out, r.err)
		})
	})

	t.Run("snapshot", func(t *testing.T) {
		dir := t.TempDir()
		if r := dractl(t, kc, "snapshot", dir); r.code != 0 {
			t.Fatalf("snapshot: exit %d: %s", r.code, r.err)
		}
		r := dractl(t, "", "get", "claims", "-f", dir)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		golden(t, "get-claims-snapshot", ages.ReplaceAllString(normalize(r.out, append(generated, "later-gpu")...), "   <age>"))
	})
}
