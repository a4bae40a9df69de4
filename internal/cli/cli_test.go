package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// TestMain runs every test from the repository root, so that golden files
// show the paths a user types (examples/..., not ../../examples/...). It is
// done once here because t.Chdir would forbid parallel tests.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := os.Chdir(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs one dractl command line in-process.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(args, Streams{In: strings.NewReader(stdin), Out: &out, Err: &errOut})
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

func (r result) String() string {
	return fmt.Sprintf("--- exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// golden compares got with testdata/<name>.golden, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("internal", "cli", "testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update and review the diff):\n%s", path, diff(string(want), got))
	}
}

// diff shows the first differing lines, enough to see what changed without
// printing two whole outputs.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, wl, gl)
		}
	}
	return "(equal lines, different length)"
}

// examples lists examples/<name>/ directories; tests skip rather than pass
// when there are none, so a missing directory is visible in -v output.
func examples(t *testing.T) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join("examples", "*"))
	var names []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			names = append(names, filepath.Base(d))
		}
	}
	if len(names) == 0 {
		t.Skip("no examples/ directories")
	}
	return names
}

// commandCase is one command line with its expected exit code.
type commandCase struct {
	name string
	args []string
	code int
}

// runCommandCases runs each case in parallel, checks its exit code and
// compares its output with testdata/<name>.golden; check, if set, looks
// further at the result.
func runCommandCases(t *testing.T, cases []commandCase, check func(*testing.T, commandCase, result)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, "", tc.args...)
			if r.code != tc.code {
				t.Errorf("dractl %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, tc.code, r)
			}
			if check != nil {
				check(t, tc, r)
			}
			golden(t, tc.name, "$ dractl "+strings.Join(tc.args, " ")+"\n"+r.String())
		})
	}
}
