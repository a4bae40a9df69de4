package dractl

// This file is dropped beside adapter_test.go by scheduler/schedperf; it
// is not compiled as part of the dractl repository.

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/dynamic-resource-allocation/structured"
	"sigs.k8s.io/yaml"

	perf "schedperf/perf"
)

var (
	benchWorkloads = flag.String("bench-workloads", "", "regular expression over <suite>/<test case>/<workload> of the performance workloads to run")
	benchRounds    = flag.Int("bench-rounds", 1, "rounds; each runs every selected workload with every side in turn")
	// A profile (-test.cpuprofile) of one side alone says where that
	// side's time goes.
	benchSides = flag.String("bench-sides", strings.Join([]string{sideInTree, sideDractl, sideFloor}, ","), "comma-separated sides to run, in this order")
	// Upstream defines no partitionable workload beyond 1,000 nodes; this
	// scales one of its own.
	benchParams = flag.String("bench-params", "", "comma-separated name=value overriding those parameters of every selected workload, which is then named <workload>+<name=value,...>")
)

// Sides of a benchmark: the in-tree plugin, dractl's in its place, and
// the floor: the in-tree configuration with pods stripped of their claims
// and extended resources, which is what the workload's shape costs
// kube-scheduler, kube-apiserver and etcd here without DRA.
const (
	sideInTree = "in-tree"
	sideDractl = "dractl"
	sideFloor  = "floor"
)

// BenchmarkSchedulerPerf runs scheduler_perf's performance workloads of
// the DRA suites, one workload at a time with each side in turn, so that
// the sides of a workload share the machine's state. Benchmarks are named
// BenchmarkSchedulerPerf/<suite>/<test case>/<workload>/<side>/<round>,
// and scheduler_perf reports the workload's metrics below that (its
// SchedulingThroughput Average, Perc50, Perc90, Perc95, Perc99). The
// thresholds are not applied here; the runner reports them beside the
// figures.
func BenchmarkSchedulerPerf(b *testing.B) {
	var sel *regexp.Regexp
	if *benchWorkloads != "" {
		var err error
		if sel, err = regexp.Compile(*benchWorkloads); err != nil {
			b.Fatal(err)
		}
	}
	sides := strings.Split(*benchSides, ",")
	for _, side := range sides {
		if side != sideInTree && side != sideDractl && side != sideFloor {
			b.Fatalf("-bench-sides: %q is not a side; want %s, %s or %s", side, sideInTree, sideDractl, sideFloor)
		}
	}
	overrides, err := parseParams(*benchParams)
	if err != nil {
		b.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", "perf", "dra"))
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range suites {
		suite := "dra"
		if s.dir != "." {
			suite = strings.ReplaceAll(s.dir, "/", "-")
		}
		dir := filepath.Join(root, s.dir)
		cases, err := readCases(filepath.Join(dir, configFile))
		if err != nil {
			b.Fatal(err)
		}
		for _, tc := range cases {
			for _, w := range workloads(tc) {
				name := suite + "/" + str(tc["name"]) + "/" + str(w["name"])
				if !slices.Contains(labels(w), "performance") || sel != nil && !sel.MatchString(name) {
					continue
				}
				if len(overrides) > 0 {
					if w, err = withParams(w, overrides, *benchParams); err != nil {
						b.Fatalf("%s: %v", name, err)
					}
					name = suite + "/" + str(tc["name"]) + "/" + str(w["name"])
				}
				for round := range *benchRounds {
					for _, side := range sides {
						b.Run(fmt.Sprintf("%s/%s/%d", name, side, round), func(b *testing.B) {
							b.Chdir(dir)
							if s.allocator != "" {
								structured.EnableAllocators(s.allocator)
								defer structured.EnableAllocators()
							}
							one, err := single(b.TempDir(), tc, w, side == sideFloor)
							if err != nil {
								b.Fatal(err)
							}
							dractl := side == sideDractl
							file, preRun := variant(b, one, dractl, false)
							items := b.TempDir()
							if err := flag.Set("data-items-dir", items); err != nil {
								b.Fatal(err)
							}
							perf.RunBenchmarkPerfScheduling(b, file, "dractl", registry(b, dractl, false), perf.WithPreRunFn(preRun))
							if err := reportLatency(b.Name(), items); err != nil {
								b.Fatal(err)
							}
						})
					}
				}
			}
		}
	}
}

// reportLatency prints, for the runner, a line with the pod latencies
// scheduler_perf stored in dir: the p50 of a scheduling attempt that
// ended with the pod bound (scheduling cycle and binding cycle, the
// PreBind API writes included) and the p50 of PreBind alone, in ms.
// scheduler_perf reports these per label in its data items only; its
// benchmark line keeps one label's value per metric.
func reportLatency(name, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != 1 {
		return fmt.Errorf("data items in %s: %v %v, want one file", dir, files, err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return err
	}
	var items struct {
		DataItems []struct {
			Data   map[string]float64
			Unit   string
			Labels map[string]string
		}
	}
	if err := json.Unmarshal(data, &items); err != nil {
		return fmt.Errorf("%s: %w", files[0], err)
	}
	attempt, preBind := "-", "-"
	// Every extension point's p50 follows, for reading: where a pod's
	// attempt goes beside PreBind.
	var points []string
	for _, it := range items.DataItems {
		p50, ok := it.Data["Perc50"]
		if !ok || it.Unit != "ms" {
			continue
		}
		v := strconv.FormatFloat(p50, 'g', 4, 64)
		switch l := it.Labels; {
		case l["Metric"] == "scheduler_scheduling_attempt_duration_seconds" && l["result"] == "scheduled":
			attempt = v
		case l["Metric"] == "scheduler_framework_extension_point_duration_seconds":
			points = append(points, l["extension_point"]+":"+v)
			if l["extension_point"] == "PreBind" {
				preBind = v
			}
		}
	}
	slices.Sort(points)
	fmt.Printf("schedperf-latency %s attempt-p50-ms=%s prebind-p50-ms=%s points-p50-ms=%s\n", name, attempt, preBind, strings.Join(points, ","))
	return nil
}

// parseParams reads name=value,... ; a value that is a whole number is
// one, as in scheduler_perf's YAML.
func parseParams(s string) (map[string]any, error) {
	out := map[string]any{}
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("-bench-params: %q is not name=value", kv)
		}
		if n, err := strconv.Atoi(v); err == nil {
			out[k] = n
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// withParams returns a copy of workload w with its parameters overridden,
// named after them; a parameter w does not have is an error.
func withParams(w, overrides map[string]any, spec string) (map[string]any, error) {
	params, _ := w["params"].(map[string]any)
	cp := map[string]any{}
	for k, v := range params {
		cp[k] = v
	}
	for k, v := range overrides {
		if _, ok := params[k]; !ok {
			return nil, fmt.Errorf("-bench-params: the workload has no parameter %q", k)
		}
		cp[k] = v
	}
	out := map[string]any{}
	for k, v := range w {
		out[k] = v
	}
	out["params"] = cp
	out["name"] = str(w["name"]) + "+" + spec
	return out, nil
}

func readCases(path string) ([]map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(data, &cases); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cases, nil
}

func workloads(tc map[string]any) []map[string]any {
	var out []map[string]any
	list, _ := tc["workloads"].([]any)
	for _, w := range list {
		if m, ok := w.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func labels(m map[string]any) []string {
	var out []string
	list, _ := m["labels"].([]any)
	for _, l := range list {
		out = append(out, str(l))
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }

// single writes, in dir, a configuration of test case tc with workload w
// alone, labelled so that the benchmark's label filter runs it, without
// its threshold. For the floor, the pods the workload creates come from
// copies of its pod templates without claims or extended resources.
func single(dir string, tc, w map[string]any, floor bool) (string, error) {
	wc := map[string]any{}
	for k, v := range w {
		wc[k] = v
	}
	wc["labels"] = []any{"performance"}
	delete(wc, "threshold")
	c := map[string]any{}
	for k, v := range tc {
		c[k] = v
	}
	c["workloads"] = []any{wc}
	delete(c, "labels")
	if floor {
		ops, _ := tc["workloadTemplate"].([]any)
		var out []any
		for i, op := range ops {
			m, ok := op.(map[string]any)
			if !ok {
				out = append(out, op)
				continue
			}
			cp := map[string]any{}
			for k, v := range m {
				cp[k] = v
			}
			if p := str(m["podTemplatePath"]); p != "" {
				stripped, err := withoutDRA(p, filepath.Join(dir, fmt.Sprintf("pod-%d.yaml", i)))
				if err != nil {
					return "", err
				}
				cp["podTemplatePath"] = stripped
			}
			out = append(out, cp)
		}
		c["workloadTemplate"] = out
	}
	data, err := yaml.Marshal([]any{c})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "one-"+configFile)
	return path, os.WriteFile(path, data, 0o644)
}

// withoutDRA writes to out the pod template at path with its claims, its
// containers' claims and every request or limit other than CPU, memory
// and ephemeral storage (extended resources) removed.
// templatedKeys are the lines of a template whose mapping key is a
// template expression.
var templatedKeys = regexp.MustCompile(`(?m)^[ \t]*\{\{[^\n]*\}\}[^\n:]*:[^\n]*\n`)

func withoutDRA(path, out string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var pod map[string]any
	if err := yaml.Unmarshal(data, &pod); err != nil {
		// scheduler_perf fills a template in (text/template) before it
		// parses it, and a template may name a resource by an expression
		// ({{.class}}-{{Mod .Index .classes}}: 1), which is no YAML key:
		// such an entry is an extended resource, which the floor leaves
		// out anyway.
		if err := yaml.Unmarshal(templatedKeys.ReplaceAll(data, nil), &pod); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
	}
	spec, _ := pod["spec"].(map[string]any)
	delete(spec, "resourceClaims")
	for _, key := range []string{"containers", "initContainers"} {
		list, _ := spec[key].([]any)
		for _, c := range list {
			ctr, _ := c.(map[string]any)
			res, _ := ctr["resources"].(map[string]any)
			delete(res, "claims")
			for _, kind := range []string{"requests", "limits"} {
				rl, _ := res[kind].(map[string]any)
				for name := range rl {
					if name != "cpu" && name != "memory" && name != "ephemeral-storage" {
						delete(rl, name)
					}
				}
			}
		}
	}
	if data, err = yaml.Marshal(pod); err != nil {
		return "", err
	}
	return out, os.WriteFile(out, data, 0o644)
}
