package app

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	fakeclientset "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/dractl/dractl/pkg/scheduler/schedplugin"
)

func TestCheckSkew(t *testing.T) {
	for _, tc := range []struct {
		scheduler, server string
		err               string
	}{
		{scheduler: "v1.37.2", server: "v1.37.0"},
		{scheduler: "v1.37.2", server: "v1.38.0-beta.0"},
		{scheduler: "v1.38.0-beta.0", server: "v1.38.1+k3s1"},
		{scheduler: "v1.37.2", server: "v1.36.3",
			err: "kube-apiserver v1.36.3 is older than this dractl-scheduler (kube-scheduler v1.37.2): kube-scheduler must not be newer than kube-apiserver; it may be up to one minor older; run the dractl-scheduler built for Kubernetes 1.36, or upgrade kube-apiserver first"},
		{scheduler: "v1.38.0-beta.0", server: "v1.37.2", err: "kube-apiserver v1.37.2 is older than this dractl-scheduler"},
		{scheduler: "v1.37.2", server: "v1.39.0",
			err: "kube-apiserver v1.39.0 is more than one minor newer than this dractl-scheduler (kube-scheduler v1.37.2): kube-scheduler must not be newer than kube-apiserver; it may be up to one minor older; run the dractl-scheduler built for Kubernetes 1.38 or 1.39"},
		{scheduler: "v1.37.2", server: "v0.0.0-master+$Format:%H$", err: `the version kube-apiserver reports: "v0.0.0-master+$Format:%H$" is no Kubernetes 1.x version`},
		{scheduler: "", server: "v1.37.2", err: `the kube-scheduler release of this binary: "" is no Kubernetes 1.x version`},
	} {
		err := checkSkew(tc.scheduler, tc.server)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("checkSkew(%s, %s) = %v, want nil", tc.scheduler, tc.server, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("checkSkew(%s, %s) = %v, want %q", tc.scheduler, tc.server, err, tc.err)
		}
	}
}

// TestCheckServer asks a discovery client for the version, as the plugin
// factory does before the scheduler starts anything.
func TestCheckServer(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &version.Info{GitVersion: "v1.36.3"}}
	if err := checkServer(d, "v1.37.2"); err == nil || !strings.Contains(err.Error(), "kube-apiserver v1.36.3 is older") {
		t.Errorf("checkServer against 1.36 = %v, want the skew refusal", err)
	}
	d.FakedServerVersion.GitVersion = "v1.37.2"
	if err := checkServer(d, "v1.37.2"); err != nil {
		t.Errorf("checkServer against 1.37 = %v", err)
	}
	// An unstamped build, as the in-process servers of the tests are.
	d.FakedServerVersion = &version.Info{Major: "1", Minor: "37", GitVersion: "v0.0.0-master+$Format:%H$"}
	if err := checkServer(d, "v1.37.2"); err != nil {
		t.Errorf("checkServer against an unstamped 1.37 = %v", err)
	}
	d.FakedServerVersion = &version.Info{Major: "1", Minor: "36+", GitVersion: "v1.36.3-gke.1"}
	if err := checkServer(d, "v1.37.2"); err == nil || !strings.Contains(err.Error(), "kube-apiserver v1.36.3-gke.1 is older") {
		t.Errorf("checkServer against a vendor's 1.36 = %v", err)
	}
	d.FakedServerVersion = &version.Info{Major: "1", Minor: "36", GitVersion: "v0.0.0-master+$Format:%H$"}
	if err := checkServer(d, "v1.37.2"); err == nil || !strings.Contains(err.Error(), "kube-apiserver 1.36 (gitVersion v0.0.0-master+$Format:%H$) is older") {
		t.Errorf("checkServer against an unstamped 1.36 = %v", err)
	}
}

// TestKubeVersion: the test binary links k8s.io/kubernetes as the command
// does, so the release read from the build information is the module's.
func TestKubeVersion(t *testing.T) {
	v := KubeVersion()
	if _, err := minorOf(v); err != nil {
		t.Fatalf("KubeVersion() = %q: %v", v, err)
	}
	if line := VersionLine(); !strings.Contains(line, "kube-scheduler "+v) || !strings.HasPrefix(line, "dractl-scheduler for Kubernetes 1.") {
		t.Errorf("VersionLine() = %q", line)
	}
}

// skewHandle is a scheduler framework handle whose only working part is
// the client: the factory must refuse before it touches anything else.
type skewHandle struct {
	fwk.Handle
	cs kubernetes.Interface
}

func (h skewHandle) ClientSet() kubernetes.Interface { return h.cs }

// TestOptionRefusesOlderServer: the plugin factory dractl-scheduler
// registers refuses to make a plugin against an older kube-apiserver, so
// that the scheduler's Setup fails before it serves or schedules.
func TestOptionRefusesOlderServer(t *testing.T) {
	registry := frameworkruntime.Registry{}
	if err := Option()(registry); err != nil {
		t.Fatal(err)
	}
	cs := fakeclientset.NewClientset()
	cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3"}
	pl, err := registry[schedplugin.Name](context.Background(), nil, skewHandle{cs: cs})
	if pl != nil || err == nil || !strings.Contains(err.Error(), "kube-scheduler must not be newer than kube-apiserver") {
		t.Fatalf("factory against 1.36 = %v, %v; want the skew rule", pl, err)
	}
}
