package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRecursiveReadsEveryFileOnce builds random trees of directories and
// manifests (files before, between and after subdirectories, empty and
// hidden directories, files that are not manifests) and reads them with
// -R: every manifest is read exactly once, in the lexical order of the
// walk, and nothing else is read.
func TestRecursiveReadsEveryFileOnce(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 0))
		root := t.TempDir()
		var want []string // object names in walk order
		n := 0
		var fill func(dir string, depth int)
		fill = func(dir string, depth int) {
			// Names are chosen so that files and directories interleave
			// in lexical order.
			entries := r.IntN(5)
			for range entries {
				name := fmt.Sprintf("%c%d", 'a'+rune(r.IntN(26)), r.IntN(100))
				path := filepath.Join(dir, name)
				if _, err := os.Stat(path + ".yaml"); err == nil {
					continue
				}
				if _, err := os.Stat(path); err == nil {
					continue
				}
				switch k := r.IntN(10); {
				case k < 5:
					n++
					obj := fmt.Sprintf("obj-%d", n)
					writeFile(t, path+".yaml", fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", obj))
				case k < 6:
					writeFile(t, path+".txt", "not a manifest\n")
				case k < 7:
					hidden := filepath.Join(dir, "."+name)
					if err := os.MkdirAll(hidden, 0o755); err != nil {
						t.Fatal(err)
					}
					writeFile(t, filepath.Join(hidden, "x.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: hidden\n")
				default:
					if depth < 4 {
						if err := os.Mkdir(path, 0o755); err != nil {
							t.Fatal(err)
						}
						fill(path, depth+1)
					}
				}
			}
		}
		fill(root, 0)
		// The expected order: a plain lexical walk, as kubectl -R walks.
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".yaml") {
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				want = append(want, strings.TrimSpace(strings.TrimPrefix(string(b[strings.Index(string(b), "name: "):]), "name: ")))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		o := &inputOptions{filenames: []string{root}, recursive: true, maxObjectBytes: "3Mi"}
		in, err := o.read()
		if len(want) == 0 {
			if err == nil {
				t.Errorf("seed %d: a tree without manifests was read without an error", seed)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(in.decodeErrors) > 0 {
			t.Fatalf("seed %d: %v", seed, in.decodeErrors[0])
		}
		var got []string
		for _, obj := range in.objects {
			got = append(got, obj.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("seed %d: read %v, want each manifest once in walk order: %v", seed, got, want)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNamespaceOffline: -n with -f is refused alike by every verb that
// reads files, with or without a cluster to read otherwise, except where
// it names the pod explain pod/NAME explains or selects the claims get
// claims lists (get-claims-namespace.golden).
func TestNamespaceOffline(t *testing.T) {
	in := filepath.Join("examples", "gpu-partitions")
	var first string
	for _, verb := range [][]string{{"validate"}, {"flatten"}, {"compact"}, {"allocate"}, {"explain"}, {"describe", "node", "my-node"}, {"get", "pools"}, {"get", "devices"}, {"simulate", "--workload", in}} {
		args := append(append([]string{}, verb...), "-f", in, "--namespace", "ml")
		r := run(t, "", args...)
		if r.code != ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, "-n ml: not with -f") {
			t.Errorf("dractl %s:\n%s", strings.Join(args, " "), r)
		}
		if first == "" {
			first = r.stderr
		} else if r.stderr != first {
			t.Errorf("dractl %s says otherwise than validate:\n%s\n%s", strings.Join(args, " "), r.stderr, first)
		}
	}
	pod := []string{"explain", "pod/waiting", "-f", in, "-f", filepath.Join("internal", "cli", "testdata", "explainpod")}
	if r := run(t, "", append(pod, "-n", "default")...); r.code != ExitOK || !strings.HasPrefix(r.stdout, "pod default/waiting:") {
		t.Errorf("explain pod/waiting -n default:\n%s", r)
	}
	if r := run(t, "", append(pod, "-n", "ml")...); r.code != ExitUsage || !strings.Contains(r.stderr, "pod ml/waiting: no such Pod in the input") {
		t.Errorf("explain pod/waiting -n ml:\n%s", r)
	}
}
