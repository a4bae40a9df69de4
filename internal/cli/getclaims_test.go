package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The AGE column is measured from a fixed moment, a little after the
// claims of testdata/get were made.
func init() {
	now = func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }
}

var getCluster = filepath.Join("internal", "cli", "testdata", "get")

// TestGetClaimsAndDevices: get claims and get devices on files (a
// cluster's objects with claims in every state), golden outputs of every
// format and filter.
func TestGetClaimsAndDevices(t *testing.T) {
	runCommandCases(t, []commandCase{
		{"get-claims", []string{"get", "claims", "-f", getCluster}, ExitOK},
		{"get-claims-namespace", []string{"get", "claims", "-n", "team-b", "-f", getCluster}, ExitOK},
		{"get-claims-selector-wide", []string{"get", "claims", "-A", "-l", "app in (train,infer)", "-o", "wide", "-f", getCluster}, ExitOK},
		{"get-claims-names", []string{"get", "claim", "shared", "unused", "-n", "team-b", "-f", getCluster}, ExitOK},
		{"get-claims-json", []string{"get", "claims", "-n", "team-a", "-o", "json", "-f", getCluster}, ExitOK},
		{"get-claims-none", []string{"get", "claims", "-n", "team-c", "-f", getCluster}, ExitOK},
		{"get-claims-bad-selector", []string{"get", "claims", "-l", "app in (", "-f", getCluster}, ExitUsage},
		{"get-claims-watch-files", []string{"get", "claims", "-w", "-f", getCluster}, ExitUsage},
		{"get-devices", []string{"get", "devices", "-f", getCluster}, ExitOK},
		{"get-devices-pool-wide", []string{"get", "devices", "gpu-a", "-o", "wide", "-f", getCluster}, ExitOK},
		{"get-devices-yaml", []string{"get", "devices", "gpu-b", "-o", "yaml", "-f", getCluster}, ExitOK},
		{"get-devices-bad-output", []string{"get", "devices", "-o", "xml", "-f", getCluster}, ExitUsage},
	}, nil)
}

// TestGetClaimsRows holds what the rows say of each claim, beyond the
// golden text: state, prepared node and pods.
func TestGetClaimsRows(t *testing.T) {
	r := run(t, "", "get", "claims", "-A", "-o", "json", "-f", getCluster)
	if r.code != ExitOK {
		t.Fatal(r)
	}
	var out struct {
		Claims []claimRow `json:"claims"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]claimRow{}
	for _, c := range out.Claims {
		got[c.Namespace+"/"+c.Name] = c
	}
	for key, want := range map[string]struct{ state, prepared, node, pods string }{
		"team-a/train-gpu":      {claimPrepared, "gpu-a", "gpu-a", "train"},
		"team-a/infer-0":        {claimPrepared, "gpu-b", "gpu-b", "infer"},
		"team-a/waiting-gpu":    {claimPending, "", "", "waiter(waiting)"},
		"team-b/shared":         {claimPrepared, "gpu-b", "gpu-b", "web-1,web-2"},
		"team-b/reserved-only":  {claimReserved, "", "gpu-b", "batch"},
		"team-b/allocated-only": {claimAllocated, "", "gpu-b", ""},
		"team-b/unused":         {claimPending, "", "", ""},
		"team-b/going":          {claimDeleting, "", "", ""},
	} {
		c, ok := got[key]
		if !ok {
			t.Errorf("%s not listed", key)
			continue
		}
		var pods []string
		for _, p := range c.Pods {
			n := p.Name
			if !p.Reserved {
				n += "(waiting)"
			}
			pods = append(pods, n)
		}
		if c.State != want.state || c.PreparedOn != want.prepared || c.Node != want.node || strings.Join(pods, ",") != want.pods {
			t.Errorf("%s: state %s, prepared on %q, node %q, pods %v; want %+v", key, c.State, c.PreparedOn, c.Node, pods, want)
		}
	}
}

// TestClaimDeleting: a claim being deleted says so whatever else it is.
func TestClaimDeleting(t *testing.T) {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", DeletionTimestamp: ptr.To(metav1.Now())},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "uid-p"}}}}
	if r := claimRowOf(c, nil, false); r.State != claimDeleting || r.Node != "<all>" || len(r.Pods) != 1 || !r.Pods[0].Reserved {
		t.Errorf("row %+v, want deleting, usable on all nodes, reserved for p", r)
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second:               "45s",
		119 * time.Second:              "119s",
		5*time.Minute + 10*time.Second: "5m10s",
		70 * time.Minute:               "70m",
		3*time.Hour + 20*time.Minute:   "3h20m",
		30 * time.Hour:                 "30h",
		3*24*time.Hour + 4*time.Hour:   "3d4h",
		40 * 24 * time.Hour:            "40d",
		3 * 365 * 24 * time.Hour:       "3y",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("%s: %s, want %s", d, got, want)
		}
	}
}
