// Package helmchart renders deploy/helm/dractl, the one source of dractl's
// install manifests, with the Helm SDK, the way `helm template` does.
// Rendered with the chart's default values it yields the kustomize
// manifests under deploy/{scheduler,monitor,driver} (Manifests), which
// `make manifests` writes and TestManifestsUpToDate holds to the chart,
// byte for byte.
package helmchart

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
)

// ChartDir is the chart, relative to the repository root.
const ChartDir = "deploy/helm/dractl"

// Release is the name and namespace the manifests are rendered for. The
// chart's objects carry their own namespaces, so neither shows in them.
var Release = common.ReleaseOptions{Name: "dractl", Namespace: "default", IsInstall: true, Revision: 1}

// KubeVersion is the Kubernetes version the manifests under deploy/ are
// rendered for: the scheduler module's kube-scheduler minor (the chart
// runs the scheduler image of the cluster's minor; TestKubeVersion holds
// this to scheduler/go.mod).
const KubeVersion = "v1.37.0"

// Render renders the chart under repo with values over its defaults for
// a cluster of KubeVersion and returns each non-empty manifest by its
// path under templates/ ("monitor/10-rbac.yaml").
func Render(repo string, values map[string]any) (map[string]string, error) {
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	return RenderFor(repo, values, *kv)
}

// RenderFor is Render for a cluster of kubeVersion, as
// `helm template --kube-version` renders.
func RenderFor(repo string, values map[string]any, kubeVersion common.KubeVersion) (map[string]string, error) {
	chrt, err := loader.Load(filepath.Join(repo, ChartDir))
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	vals, err := chartutil.ToRenderValues(chrt, values, Release, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	// Strict: a value the templates name but values.yaml lacks is an
	// error, not an empty string in a manifest.
	out, err := engine.Engine{Strict: true}.Render(chrt, vals)
	if err != nil {
		return nil, err
	}
	prefix := chrt.Name() + "/templates/"
	manifests := map[string]string{}
	for name, text := range out {
		rel, ok := strings.CutPrefix(name, prefix)
		if !ok || strings.HasPrefix(path.Base(rel), "_") || path.Base(rel) == "NOTES.txt" || strings.TrimSpace(text) == "" {
			continue
		}
		manifests[rel] = text
	}
	return manifests, nil
}

// Lint runs Helm's linter (`helm lint --strict`) on the chart with values
// and returns its findings above the informational.
func Lint(repo string, values map[string]any) []string {
	l := action.NewLint()
	l.Strict = true
	if kv, err := common.ParseKubeVersion(KubeVersion); err == nil {
		l.KubeVersion = kv
	}
	res := l.Run([]string{filepath.Join(repo, ChartDir)}, values)
	var out []string
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			out = append(out, m.Error())
		}
	}
	for _, err := range res.Errors {
		if !slices.Contains(out, err.Error()) {
			out = append(out, err.Error())
		}
	}
	return out
}

// Header opens every file Manifests generates.
const Header = "# Generated from deploy/helm/dractl by `make manifests` with the chart's\n# default values: edit the chart, not this file.\n"

// Components are the directories under deploy/ the chart's templates/
// mirror.
var Components = []string{"scheduler", "monitor", "driver"}

// Manifests returns the files of deploy/{scheduler,monitor,driver}, by
// path relative to repo, as the chart with its default values makes them:
// each template's rendering at the same path under deploy/, the scheduler
// configurations the chart bundles (kube-scheduler's --config, and the
// tests of the plugin order, read them there), and the scheduler's
// kustomization.yaml.
func Manifests(repo string) (map[string][]byte, error) {
	rendered, err := Render(repo, nil)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	var scheduler []string
	for rel, text := range rendered {
		comp, _, _ := strings.Cut(rel, "/")
		if !slices.Contains(Components, comp) {
			return nil, fmt.Errorf("template %s: not under a component's directory (%v)", rel, Components)
		}
		files[path.Join("deploy", rel)] = []byte(Header + text)
		if comp == "scheduler" {
			scheduler = append(scheduler, path.Base(rel))
		}
	}
	configs, err := filepath.Glob(filepath.Join(repo, ChartDir, "files", "scheduler", "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, c := range configs {
		data, err := os.ReadFile(c)
		if err != nil {
			return nil, err
		}
		files[path.Join("deploy", "scheduler", filepath.Base(c))] = append([]byte(Header), data...)
	}
	sort.Strings(scheduler)
	var k bytes.Buffer
	k.WriteString(Header)
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, f := range scheduler {
		fmt.Fprintf(&k, "- %s\n", f)
	}
	files[path.Join("deploy", "scheduler", "kustomization.yaml")] = k.Bytes()
	return files, nil
}

// Stale lists the YAML files under deploy/{scheduler,monitor,driver} that
// Manifests does not make: hand-written manifests, which would drift, or
// generated ones whose template is gone.
func Stale(repo string, generated map[string][]byte) ([]string, error) {
	var stale []string
	for _, comp := range Components {
		matches, err := filepath.Glob(filepath.Join(repo, "deploy", comp, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			rel := path.Join("deploy", comp, filepath.Base(m))
			if _, ok := generated[rel]; !ok {
				stale = append(stale, rel)
			}
		}
	}
	sort.Strings(stale)
	return stale, nil
}

// Write writes Manifests' files under repo and removes the stale ones
// that carry Header (a hand-written file is left for its author to move
// into the chart).
func Write(repo string) error {
	files, err := Manifests(repo)
	if err != nil {
		return err
	}
	for rel, data := range files {
		if err := os.WriteFile(filepath.Join(repo, rel), data, 0o644); err != nil {
			return err
		}
	}
	stale, err := Stale(repo, files)
	if err != nil {
		return err
	}
	var handWritten []string
	for _, rel := range stale {
		data, err := os.ReadFile(filepath.Join(repo, rel))
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(data, []byte(Header)) {
			handWritten = append(handWritten, rel)
			continue
		}
		if err := os.Remove(filepath.Join(repo, rel)); err != nil {
			return err
		}
	}
	if len(handWritten) > 0 {
		return fmt.Errorf("not made by the chart (move them into %s/templates): %s", ChartDir, strings.Join(handWritten, ", "))
	}
	return nil
}
