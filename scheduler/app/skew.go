package app

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/client-go/discovery"
)

// KubeVersion is the release of k8s.io/kubernetes, and so of
// kube-scheduler, this binary is built from ("v1.37.2"), as the Go
// toolchain recorded it; the minor alone ("v1.37") in a binary without
// module information.
func KubeVersion() string {
	info, _ := debug.ReadBuildInfo()
	var deps []*debug.Module
	if info != nil {
		deps = info.Deps
	}
	for _, m := range deps {
		if m.Path == "k8s.io/kubernetes" {
			if m.Replace != nil && m.Replace.Version != "" {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return "v" + builtFor
}

// VersionLine is what `dractl-scheduler --version` prints.
func VersionLine() string {
	v := KubeVersion()
	minor, err := minorOf(v)
	if err != nil {
		return "dractl-scheduler (kube-scheduler of an unknown release)"
	}
	return fmt.Sprintf("dractl-scheduler for Kubernetes 1.%d (kube-scheduler %s with dractl's DRA plugin)", minor, v)
}

// minorOf reads the minor of a Kubernetes 1.x version ("v1.37.2",
// "v1.38.0-beta.0", "1.36").
func minorOf(v string) (int, error) {
	t := strings.TrimPrefix(v, "v")
	major, rest, ok := strings.Cut(t, ".")
	if end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
		rest = rest[:end]
	}
	minor, err := strconv.Atoi(rest)
	if !ok || major != "1" || err != nil {
		return 0, fmt.Errorf("%q is no Kubernetes 1.x version", v)
	}
	return minor, nil
}

// checkSkew applies kube-scheduler's version skew policy to a scheduler
// of release scheduler and a kube-apiserver reporting server: the
// scheduler must not be newer than kube-apiserver and may be up to one
// minor older.
func checkSkew(scheduler, server string) error {
	own, err := minorOf(scheduler)
	if err != nil {
		return fmt.Errorf("the kube-scheduler release of this binary: %w", err)
	}
	theirs, err := minorOf(server)
	if err != nil {
		return fmt.Errorf("the version kube-apiserver reports: %w", err)
	}
	const rule = "kube-scheduler must not be newer than kube-apiserver; it may be up to one minor older"
	switch {
	case theirs < own:
		return fmt.Errorf("kube-apiserver %s is older than this dractl-scheduler (kube-scheduler %s): %s; run the dractl-scheduler built for Kubernetes 1.%d, or upgrade kube-apiserver first",
			server, scheduler, rule, theirs)
	case theirs > own+1:
		return fmt.Errorf("kube-apiserver %s is more than one minor newer than this dractl-scheduler (kube-scheduler %s): %s; run the dractl-scheduler built for Kubernetes 1.%d or 1.%d",
			server, scheduler, rule, theirs-1, theirs)
	}
	return nil
}

// checkServer asks kube-apiserver for its version and applies checkSkew.
// The major and minor it reports are its binary version even where its
// gitVersion is a placeholder (a build without version stamps, as
// in-process test servers are) or a vendor's; "37+" reads as 37.
func checkServer(d discovery.ServerVersionInterface, scheduler string) error {
	info, err := d.ServerVersion()
	if err != nil {
		return fmt.Errorf("read kube-apiserver's version to check the version skew: %w", err)
	}
	server := info.GitVersion
	if info.Major != "" && info.Minor != "" {
		minor := strings.TrimRight(info.Minor, "+")
		if _, err := minorOf(info.Major + "." + minor); err == nil && !strings.HasPrefix(strings.TrimPrefix(server, "v"), info.Major+"."+minor) {
			server = fmt.Sprintf("1.%s (gitVersion %s)", minor, info.GitVersion)
		}
	}
	return checkSkew(scheduler, server)
}
