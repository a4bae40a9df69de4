package matrix

import (
	"strings"
	"testing"
)

// TestScratchModule: the scratch module requires the release and pins
// every staging module kubernetes' go.mod points at ./staging to its
// published version, and nothing else.
func TestScratchModule(t *testing.T) {
	kube := `module k8s.io/kubernetes

go 1.24.0

require (
	k8s.io/api v0.0.0
	github.com/spf13/cobra v1.9.1
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
)
`
	got, err := ScratchModule([]byte(kube), "v1.34.4")
	if err != nil {
		t.Fatal(err)
	}
	want := "module kube-apiserver-1.34\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes v1.34.4\n\n" +
		"replace k8s.io/api => k8s.io/api v0.34.4\nreplace k8s.io/client-go => k8s.io/client-go v0.34.4\n"
	if got != want {
		t.Errorf("ScratchModule:\n%s\nwant:\n%s", got, want)
	}
	for _, bad := range []struct{ gomod, release, err string }{
		{kube, "1.34", `expected a release such as v1.34.4, found "1.34"`},
		{"module k8s.io/kubernetes\n", "v1.34.4", "no go directive"},
		{"module k8s.io/kubernetes\n\ngo 1.24.0\n", "v1.34.4", "replaces no staging module"},
	} {
		if _, err := ScratchModule([]byte(bad.gomod), bad.release); err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("ScratchModule(%q, %s): %v, want %q", bad.gomod, bad.release, err, bad.err)
		}
	}
}

// TestDRAGates reads the DRA gates of kube-apiserver's --help, not the
// others.
func TestDRAGates(t *testing.T) {
	help := `      --feature-gates mapStringBool
                APIResponseCompression=true|false (BETA - default=true)
                DRAAdminAccess=true|false (BETA - default=true)
                DRAConsumableCapacity=true|false (ALPHA - default=false)
                DynamicResourceAllocation=true|false (BETA - default=false)
                GenericWorkload=true|false (ALPHA - default=false)`
	var got []string
	for _, m := range draGate.FindAllStringSubmatch(help, -1) {
		got = append(got, m[1])
	}
	if strings.Join(got, ",") != "DRAAdminAccess,DRAConsumableCapacity,DynamicResourceAllocation" {
		t.Errorf("gates %v", got)
	}
	m := gateDependency.FindStringSubmatch(`E1202 run.go:72] "command failed" err="DRAWorkloadResourceClaims is enabled, but depends on features that are disabled: [GenericWorkload]"`)
	if m == nil || m[1] != "DRAWorkloadResourceClaims" || m[2] != "GenericWorkload" {
		t.Errorf("dependency %v", m)
	}
}

// TestNeedsNewerGo: a release whose go.mod names a Go newer than the
// running one is built with the given toolchain, the others with the
// machine's.
func TestNeedsNewerGo(t *testing.T) {
	for _, c := range []struct {
		gomod, running string
		want           bool
	}{
		{"1.27.0", "go1.26.8", true},
		{"1.26.0", "go1.26.8", false},
		{"1.24.0", "go1.26.8", false},
		{"1.26.8", "go1.26.8", false},
		{"1.27.0", "go1.27.3", false},
	} {
		if got := NeedsNewerGo(c.gomod, c.running); got != c.want {
			t.Errorf("NeedsNewerGo(%s, %s) = %v, want %v", c.gomod, c.running, got, c.want)
		}
	}
}

// TestScratchModulePreRelease: a pre-release pins its staging modules to
// the same pre-release.
func TestScratchModulePreRelease(t *testing.T) {
	got, err := ScratchModule([]byte("module k8s.io/kubernetes\n\ngo 1.27.0\n\nreplace k8s.io/ktesting => ./staging/src/k8s.io/ktesting\n"), "v1.38.0-beta.0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "require k8s.io/kubernetes v1.38.0-beta.0\n") || !strings.Contains(got, "replace k8s.io/ktesting => k8s.io/ktesting v0.38.0-beta.0\n") {
		t.Errorf("ScratchModule of a pre-release:\n%s", got)
	}
}
