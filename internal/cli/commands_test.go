package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/ops/manifest"
)

// TestCommands runs command lines in-process and compares stdout, stderr
// and the exit code with testdata/<name>.golden. The exit code is also
// asserted here so that -update cannot silently bless a wrong one.
func TestCommands(t *testing.T) {
	bad := func(name string) string { return filepath.Join("internal", "cli", "testdata", "bad", name) }
	cases := []struct {
		name  string
		args  []string
		stdin string
		code  int
	}{
		{"validate-bad-unknown-field", []string{"validate", "-f", bad("unknown-field.yaml")}, "", ExitInvalid},
		{"validate-bad-quantity", []string{"validate", "-f", bad("bad-quantity.yaml")}, "", ExitInvalid},
		{"validate-bad-devices-and-counters", []string{"validate", "-f", bad("devices-and-counters.yaml")}, "", ExitInvalid},
		{"validate-bad-duplicate-device", []string{"validate", "-f", bad("duplicate-device.yaml")}, "", ExitInvalid},
		{"validate-bad-unknown-include", []string{"validate", "-f", bad("unknown-include.yaml")}, "", ExitInvalid},
		{"validate-bad-missing-counter-set", []string{"validate", "-f", bad("missing-counter-set.yaml")}, "", ExitInvalid},
		{"validate-bad-claim", []string{"validate", "-f", bad("bad-claim.yaml")}, "", ExitInvalid},
		{"validate-bad-not-yaml", []string{"validate", "-f", bad("not-yaml.yaml")}, "", ExitInvalid},
		{"validate-incomplete-pool", []string{"validate", "-f", bad("incomplete-pool.yaml")}, "", ExitOK},
		// Every bad input at once: one bad document must not hide the
		// problems of the others.
		{"validate-bad-all", []string{"validate", "-f", filepath.Join("internal", "cli", "testdata", "bad")}, "", ExitInvalid},
		// Both copies publish the same pool: a pool is only ever read as a
		// whole, so the duplicates are errors even though each copy is valid.
		{"validate-same-pool-twice", []string{"validate", "-f", filepath.Join("examples", "gpu-partitions", "resourceslices.yaml"), "-f", filepath.Join("examples", "gpu-partitions", "resourceslices.yaml")}, "", ExitInvalid},
		// -R reads every example; the two A100 examples publish the same
		// pool, so this is the same-pool-twice case at full size.
		{"validate-recursive-examples", []string{"validate", "-R", "-f", "examples"}, "", ExitInvalid},
		{"validate-stdin", []string{"validate", "-f", "-"}, "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: stdin-gpu\nspec:\n  driver: gpu.example.com\n  nodeName: node-1\n  pool: {name: stdin, generation: 1, resourceSliceCount: 1}\n  devices:\n  - name: Bad_Name\n", ExitInvalid},
		{"validate-negative-slice-count", []string{"validate", "-f", "-"}, "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: negative\nspec:\n  driver: gpu.example.com\n  nodeName: node-1\n  pool: {name: negative, generation: 1, resourceSliceCount: -3}\n", ExitInvalid},
		// Nothing to check is nothing checked: as an unreadable input.
		{"validate-no-manifests", []string{"validate", "-f", filepath.Join("internal", "cli", "testdata", "bad", "no-manifests")}, "", ExitUsage},
		{"validate-recursive-no-manifests", []string{"validate", "-R", "-f", filepath.Join("internal", "cli", "testdata", "bad", "no-manifests")}, "", ExitUsage},
		// What a failed kubectl leaves before the pipe; an empty List is
		// what a kubectl that found nothing prints, and is no error.
		{"validate-empty-stdin", []string{"validate", "-f", "-"}, "", ExitUsage},
		{"validate-comments-only-stdin", []string{"validate", "-f", "-", "-f", inputFile("json-stream.json")}, "# nothing here\n---\n", ExitUsage},
		{"validate-empty-list", []string{"validate", "-f", "-"}, "apiVersion: v1\nkind: List\nitems: []\n", ExitOK},
		// Files above, beside and below a subdirectory are each read once.
		{"validate-recursive-tree", []string{"validate", "-R", "-f", filepath.Join("internal", "cli", "testdata", "recursive")}, "", ExitOK},
		{"allocate-recursive-tree", []string{"allocate", "-R", "-f", filepath.Join("internal", "cli", "testdata", "recursive")}, "", ExitOK},
		{"validate-missing-file", []string{"validate", "-f", "does/not/exist.yaml"}, "", ExitUsage},
		{"validate-no-input", []string{"validate"}, "", ExitUsage},
		{"validate-unknown-flag", []string{"validate", "--bogus"}, "", ExitUsage},
		// The extended-resource claim kube-scheduler would make, per node.
		{"explain-pod-extended-resources", []string{"explain", "pod/mixed", "-f", filepath.Join("internal", "cli", "testdata", "allocate", "extended-resources.yaml")}, "", ExitOK},
		{"explain-pod-from-files", []string{"explain", "pod/waiting", "-f", filepath.Join("examples", "gpu-partitions"), "-f", filepath.Join("internal", "cli", "testdata", "explainpod")}, "", ExitOK},
		// Without Node objects, the nodes the slices name, as allocate tries them.
		{"explain-pod-no-nodes", []string{"explain", "pod/waiting", "-f", filepath.Join("examples", "gpu-partitions", "resourceslices.yaml"), "-f", filepath.Join("examples", "gpu-partitions", "deviceclass.yaml"), "-f", filepath.Join("internal", "cli", "testdata", "explainpod")}, "", ExitOK},
		{"explain-pod-unknown-node", []string{"explain", "pod/waiting", "--node", "nope", "-f", filepath.Join("examples", "gpu-partitions"), "-f", filepath.Join("internal", "cli", "testdata", "explainpod")}, "", ExitUsage},
		{"explain-pod-missing-claim", []string{"explain", "pod/orphan", "-f", filepath.Join("examples", "gpu-partitions"), "-f", filepath.Join("internal", "cli", "testdata", "explainpod-orphan.yaml")}, "", ExitUsage},
		{"explain-pod-unknown", []string{"explain", "pod/nobody", "-f", filepath.Join("examples", "gpu-partitions")}, "", ExitUsage},
		{"explain-not-a-pod", []string{"explain", "node/my-node", "-f", filepath.Join("examples", "gpu-partitions")}, "", ExitUsage},
		{"get-bad-output", []string{"get", "pools", "-o", "xml"}, "", ExitUsage},
		{"get-not-pools", []string{"get", "nodes"}, "", ExitUsage},
		// A snapshot directory, read as describe reads it.
		{"get-pools-snapshot", []string{"get", "pools", "-f", filepath.Join("internal", "cli", "testdata", "simulate", "snapshot")}, "", ExitOK},
		{"get-pools-snapshot-wide", []string{"get", "pools", "a100-node-b", "-o", "wide", "-f", filepath.Join("internal", "cli", "testdata", "simulate", "snapshot")}, "", ExitOK},
		{"get-pools-bad-input", []string{"get", "pools", "-f", filepath.Join("internal", "cli", "testdata", "bad", "bad-claim.yaml")}, "", ExitCannotAnswer},
		{"validate-live-and-files", []string{"validate", "--live", "-f", filepath.Join("examples", "gpu-partitions")}, "", ExitUsage},
		{"allocate-namespace-offline", []string{"allocate", "-n", "ml", "-f", filepath.Join("examples", "gpu-partitions")}, "", ExitUsage},
		{"unknown-command", []string{"frobnicate"}, "", ExitUsage},
		{"unknown-command-suggestion", []string{"valdate", "-f", "examples"}, "", ExitUsage},
		{"flatten-bad-output", []string{"flatten", "-o", "xml", "-f", bad("unknown-include.yaml")}, "", ExitUsage},
		{"flatten-v1-limits", []string{"flatten", "-f", filepath.Join("internal", "cli", "testdata", "v1-limits.yaml")}, "", ExitOK},
		{"flatten-v1-limits-strict", []string{"flatten", "--strict", "-f", filepath.Join("internal", "cli", "testdata", "v1-limits.yaml")}, "", ExitOK},
		{"flatten-v1-unsplittable", []string{"flatten", "-f", filepath.Join("internal", "cli", "testdata", "v1-unsplittable.yaml")}, "", ExitOK},
		{"flatten-v1-unsplittable-strict", []string{"flatten", "--strict", "-f", filepath.Join("internal", "cli", "testdata", "v1-unsplittable.yaml")}, "", ExitInvalid},
		{"validate-warnings", []string{"validate", "--kube-version", "1.37", "-f", filepath.Join("internal", "cli", "testdata", "warnings.yaml")}, "", ExitOK},
		// One input, the verdicts of each supported kube-apiserver minor.
		{"validate-kube-versions", []string{"validate", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitInvalid},
		{"validate-kube-versions-json", []string{"validate", "-o", "json", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitInvalid},
		{"validate-kube-version-1.37", []string{"validate", "--kube-version", "1.37", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitOK},
		{"validate-kube-version-1.38", []string{"validate", "--kube-version", "v1.38.0-beta.0", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitInvalid},
		{"validate-kube-version-unsupported", []string{"validate", "--kube-version", "1.36", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitUsage},
		{"validate-kube-version-not-a-version", []string{"validate", "--kube-version", "latest", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitUsage},
		{"flatten-kube-version-1.37", []string{"flatten", "--kube-version", "1.37", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitOK},
		{"flatten-kube-version-1.38", []string{"flatten", "--kube-version", "1.38", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitInvalid},
		{"compact-kube-version-1.37", []string{"compact", "--kube-version", "1.37", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitOK},
		{"compact-kube-version-default", []string{"compact", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitInvalid},
		{"allocate-kube-version-1.38", []string{"allocate", "--kube-version", "1.38", "-f", filepath.Join("internal", "cli", "testdata", "kube-versions.yaml")}, "", ExitUsage},
		// The allocator answers as the named minor's kube-scheduler: 1.38
		// ignores semver build metadata in matchAttribute, 1.37 does not.
		{"allocate-build-metadata-1.37", []string{"allocate", "--kube-version", "1.37", "-f", filepath.Join("internal", "cli", "testdata", "allocate", "build-metadata.yaml")}, "", ExitNoFit},
		{"allocate-build-metadata-default", []string{"allocate", "-f", filepath.Join("internal", "cli", "testdata", "allocate", "build-metadata.yaml")}, "", ExitOK},
		// The whole GPU listed before its partitions (KEP-4815 first fit).
		{"validate-largest-first", []string{"validate", "-f", filepath.Join("internal", "cli", "testdata", "largest-first.yaml")}, "", ExitOK},
		{"validate-v1-limits", []string{"validate", "-f", filepath.Join("internal", "cli", "testdata", "v1-limits.yaml")}, "", ExitOK},
		{"flatten-json", []string{"flatten", "-o", "json", "-f", filepath.Join("examples", "gpu-partitions", "resourceslices.yaml")}, "", ExitOK},
		{"compact-json-skip-consumptions", []string{"compact", "-o", "json", "--skip-consumptions", "-f", filepath.Join("examples", "gpu-partitions", "resourceslices.yaml")}, "", ExitOK},
		{"compact-bad-limit", []string{"compact", "--max-device-mixins", "-1", "-f", filepath.Join("examples", "gpu-partitions")}, "", ExitUsage},
		{"compact-bad-unknown-include", []string{"compact", "-f", bad("unknown-include.yaml")}, "", ExitInvalid},
		{"flatten-bad-unknown-field", []string{"flatten", "-f", bad("unknown-field.yaml"), "-f", bad("incomplete-pool.yaml")}, "", ExitInvalid},
		{"flatten-bad-unknown-include", []string{"flatten", "-f", bad("unknown-include.yaml")}, "", ExitInvalid},
		// Kinds dractl has no rules for are read and counted, and flatten
		// prints every object it does not rewrite exactly as written.
		{"validate-namespace-demo", []string{"validate", "-f", inputFile("namespace-demo.yaml")}, "", ExitOK},
		{"flatten-namespace-demo", []string{"flatten", "-f", inputFile("namespace-demo.yaml")}, "", ExitOK},
		// A JSON stream with "---" lines between the values, as kubectl reads it.
		// Admin access outside a labelled namespace, as kube-apiserver refuses it.
		{"validate-admin-access", []string{"validate", "-f", inputFile("admin-access.yaml")}, "", ExitInvalid},
		{"allocate-admin-access", []string{"allocate", "-f", inputFile("admin-access.yaml")}, "", ExitCannotAnswer},
		// Placeholders of a templated file are named as such.
		{"validate-templated-demo", []string{"validate", "-f", inputFile("templated-demo.yaml")}, "", ExitInvalid},
		{"validate-json-stream", []string{"validate", "-f", inputFile("json-stream.json")}, "", ExitOK},
		{"validate-v1beta1", []string{"validate", "-f", inputFile("v1beta1.yaml")}, "", ExitOK},
		{"validate-incomplete-unresolved", []string{"validate", "-f", inputFile("incomplete-unresolved.yaml")}, "", ExitOK},
		{"validate-json", []string{"validate", "-o", "json", "-f", filepath.Join("internal", "cli", "testdata", "bad")}, "", ExitInvalid},
		{"validate-json-valid", []string{"validate", "-o", "json", "-f", inputFile("incomplete-unresolved.yaml")}, "", ExitOK},
		{"validate-bad-output", []string{"validate", "-o", "xml", "-f", inputFile("json-stream.json")}, "", ExitUsage},
		{"validate-yaml", []string{"validate", "-o", "yaml", "-f", filepath.Join("internal", "cli", "testdata", "bad", "bad-claim.yaml")}, "", ExitInvalid},
		{"validate-stdin-twice", []string{"validate", "-f", "-", "-f", "-"}, "", ExitUsage},
		{"validate-max-object-size", []string{"validate", "--max-object-size", "1Ki", "-f", inputFile("invalid-mixins.yaml"), "-f", inputFile("json-stream.json")}, "", ExitInvalid},
		{"validate-bad-max-object-size", []string{"validate", "--max-object-size", "-1", "-f", inputFile("json-stream.json")}, "", ExitUsage},
		{"flatten-invalid", []string{"flatten", "-f", inputFile("invalid-mixins.yaml"), "-f", inputFile("json-stream.json")}, "", ExitInvalid},
		{"compact-invalid", []string{"compact", "-f", inputFile("invalid-mixins.yaml")}, "", ExitInvalid},
		{"version-help", []string{"version", "--help"}, "", ExitOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, tc.stdin, tc.args...)
			if r.code != tc.code {
				t.Errorf("dractl %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, tc.code, r)
			}
			golden(t, tc.name, "$ dractl "+strings.Join(tc.args, " ")+"\n"+r.String())
		})
	}
}

// TestExamples runs validate and flatten on every example, and compact on
// the flat ones. Examples are meant to be valid, so every exit code is 0.
func TestExamples(t *testing.T) {
	for _, ex := range examples(t) {
		dir := filepath.Join("examples", ex)
		t.Run(ex, func(t *testing.T) {
			t.Parallel()
			for _, verb := range []string{"validate", "flatten", "compact"} {
				args := []string{verb, "-f", dir}
				r := run(t, "", args...)
				if r.code != ExitOK {
					t.Errorf("dractl %s: exit %d, want 0\n%s", strings.Join(args, " "), r.code, r)
				}
				golden(t, verb+"-"+ex, "$ dractl "+strings.Join(args, " ")+"\n"+r.String())
			}
		})
	}
}

func inputFile(name string) string {
	return filepath.Join("internal", "cli", "testdata", "input", name)
}

func TestVersion(t *testing.T) {
	r := run(t, "", "version")
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "dractl ") || r.stderr != "" {
		t.Errorf("dractl version:\n%s", r)
	}
	r = run(t, "", "version", "-o", "json")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"goVersion"`) || !strings.Contains(r.stdout, `"commit"`) {
		t.Errorf("dractl version -o json has no goVersion or commit:\n%s", r)
	}
}

// TestCompletion: cobra's completion verb writes each shell's script, and
// completes the verbs.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "# bash completion V2 for dractl", "zsh": "#compdef dractl", "fish": "# fish completion for dractl", "powershell": "# powershell completion for dractl"} {
		r := run(t, "", "completion", shell)
		if r.code != ExitOK || !strings.HasPrefix(r.stdout, want) {
			t.Errorf("dractl completion %s: exit %d, output begins %.60q", shell, r.code, r.stdout)
		}
	}
	r := run(t, "", "__complete", "expl")
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "explain\t") {
		t.Errorf("completing expl: exit %d\n%s", r.code, r)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 412338: "412,338", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestCompactRoundTrip checks through the CLI what compact promises: the
// compacted output, flattened, has the same slices as the input flattened.
// It goes through stdout and stdin like `dractl compact | dractl flatten -f -`.
func TestCompactRoundTrip(t *testing.T) {
	for _, ex := range examples(t) {
		dir := filepath.Join("examples", ex)
		t.Run(ex, func(t *testing.T) {
			t.Parallel()
			// JSON rather than YAML: the YAML encoder is slow under -race
			// and the goldens already cover the YAML output.
			direct := run(t, "", "flatten", "-o", "json", "-f", dir)
			compacted := run(t, "", "compact", "-o", "json", "-f", dir)
			if compacted.code != ExitOK {
				t.Fatalf("dractl compact -f %s:\n%s", dir, compacted)
			}
			roundTrip := run(t, compacted.stdout, "flatten", "-o", "json", "-f", "-")
			if direct.code != roundTrip.code {
				t.Errorf("flatten exit %d, compact | flatten exit %d", direct.code, roundTrip.code)
			}
			want, got := slicesByName(t, direct.stdout), slicesByName(t, roundTrip.stdout)
			if len(want) == 0 {
				t.Fatalf("flatten -f %s printed no ResourceSlice", dir)
			}
			if len(got) != len(want) {
				t.Errorf("compact | flatten: %d slices, flatten: %d", len(got), len(want))
			}
			for name, w := range want {
				g, ok := got[name]
				if !ok {
					t.Errorf("ResourceSlice %s: missing after compact | flatten", name)
					continue
				}
				if !equality.Semantic.DeepEqual(w, g) {
					t.Errorf("ResourceSlice %s differs after compact | flatten:\n%s", name, diff(asJSON(t, w), asJSON(t, g)))
				}
			}
		})
	}
}

func slicesByName(t *testing.T, manifest string) map[string]*api.ResourceSlice {
	t.Helper()
	objs, err := decode.Bytes("-", []byte(manifest))
	if err != nil {
		t.Fatalf("decoding flatten output: %v", err)
	}
	out := make(map[string]*api.ResourceSlice)
	for _, o := range objs {
		if s, ok := o.Obj.(*api.ResourceSlice); ok {
			out[s.Name] = s
		}
	}
	return out
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzStdin feeds arbitrary bytes to validate and flatten through stdin.
// Whatever the input, the commands must not panic, must not call it a usage
// error (stdin was readable) unless it held no document at all, and
// validate must end with its summary line.
func FuzzStdin(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("internal", "cli", "testdata", "bad", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join("examples", "gpu-partitions", "*.yaml"))
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d.example.com","allNodes":true,"pool":{"name":"p","resourceSliceCount":1},"mixins":{"device":[{"name":"m"}]},"devices":[{"name":"a","includes":["m","m"]}]}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, verb := range []string{"validate", "flatten"} {
			var out, errOut bytes.Buffer
			code := Run([]string{verb, "-f", "-"}, Streams{In: bytes.NewReader(in), Out: &out, Err: &errOut})
			if code == ExitUsage && errOut.String() == "error: -f -: standard input holds no objects\n" && out.Len() == 0 {
				continue
			}
			if code != ExitOK && code != ExitInvalid {
				t.Fatalf("dractl %s -f -: exit %d\nstderr: %s", verb, code, errOut.String())
			}
			if verb == "validate" {
				lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
				last := lines[len(lines)-1]
				if valid := strings.HasSuffix(last, ": valid"); valid != (code == ExitOK) {
					t.Fatalf("validate exit %d but summary %q", code, last)
				}
			}
		}
	})
}

// TestFlattenIsPlainV1 checks flatten's promise that a kube-apiserver
// without mixins accepts its output: every ResourceSlice it prints decodes
// strictly into the upstream resource.k8s.io/v1 type, so no KEP-5234 field
// (includes, mixins) is left over, and no upstream field is lost on the way.
func TestFlattenIsPlainV1(t *testing.T) {
	for _, ex := range examples(t) {
		dir := filepath.Join("examples", ex)
		t.Run(ex, func(t *testing.T) {
			t.Parallel()
			r := run(t, "", "flatten", "-o", "json", "-f", dir)
			if r.code != ExitOK {
				t.Fatalf("dractl flatten -o json -f %s:\n%s", dir, r)
			}
			var list struct {
				Kind  string            `json:"kind"`
				Items []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || list.Kind != "List" {
				t.Fatalf("flatten -o json of several objects: want a v1 List, got kind %q (%v)", list.Kind, err)
			}
			slices := 0
			for i, item := range list.Items {
				var meta metav1.TypeMeta
				if err := json.Unmarshal(item, &meta); err != nil {
					t.Fatalf("items[%d]: %v", i, err)
				}
				if meta.Kind != "ResourceSlice" {
					continue
				}
				slices++
				if meta.APIVersion != "resource.k8s.io/v1" {
					t.Errorf("items[%d]: apiVersion %q, want resource.k8s.io/v1", i, meta.APIVersion)
				}
				var s resourcev1.ResourceSlice
				strict, err := sigsjson.UnmarshalStrict(item, &s)
				if err != nil || len(strict) > 0 {
					t.Errorf("items[%d] is not a plain v1 ResourceSlice: %v %v", i, err, strict)
				}
			}
			if slices == 0 {
				t.Errorf("flatten -f %s printed no ResourceSlice", dir)
			}
		})
	}
}

// TestCompactRepack runs compact --repack on the flat DGX H100 pool as a
// driver would publish it under the plain v1 limits: the pool moves into
// fewer slices that flatten to the same devices and counter sets.
func TestCompactRepack(t *testing.T) {
	var in []any
	for _, s := range examplegen.DGXH100Node.Slices(examplegen.Flat) {
		in = append(in, s)
	}
	var buf bytes.Buffer
	if err := manifest.Write(&buf, in, "json"); err != nil {
		t.Fatal(err)
	}
	direct := run(t, buf.String(), "flatten", "-o", "json", "-f", "-")
	compacted := run(t, buf.String(), "compact", "--repack", "-o", "json", "-f", "-")
	if compacted.code != ExitOK {
		t.Fatalf("compact --repack:\n%s", compacted)
	}
	if !strings.Contains(compacted.stderr, "5 slices in 3 slices") {
		t.Errorf("compact --repack did not report 5 slices in 3:\n%s", compacted.stderr)
	}
	roundTrip := run(t, compacted.stdout, "flatten", "-o", "json", "-f", "-")
	devices := func(manifest string) (map[string]api.Device, map[string]api.CounterSet, int) {
		ds, cs := map[string]api.Device{}, map[string]api.CounterSet{}
		slices := slicesByName(t, manifest)
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				ds[d.Name] = d
			}
			for _, c := range s.Spec.SharedCounters {
				cs[c.Name] = c
			}
		}
		return ds, cs, len(slices)
	}
	wd, wc, wn := devices(direct.stdout)
	gd, gc, gn := devices(roundTrip.stdout)
	// Flattened again, the 3 repacked slices are split where v1's limits
	// require, as the driver that published the flat form split them.
	if wn != 5 || gn != 5 {
		t.Errorf("slices: %d before, %d after; want 5 and 5", wn, gn)
	}
	if len(wd) != 152 || !equality.Semantic.DeepEqual(wd, gd) || !equality.Semantic.DeepEqual(wc, gc) {
		t.Errorf("devices or counter sets changed: %d/%d devices, %d/%d counter sets", len(gd), len(wd), len(gc), len(wc))
	}
	if v := run(t, compacted.stdout, "validate", "-f", "-"); v.code != ExitOK {
		t.Errorf("repacked pool does not validate:\n%s", v)
	}
}
