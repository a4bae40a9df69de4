package cli

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpExamples runs the Example lines of every verb's --help as a
// user would paste them, from the repository root: a pipeline's dractl
// commands run in turn, each reading the one before; a jq stage is not
// run, but what it would read must be JSON; output redirected to a file
// is dropped. A command line that needs a cluster (kubectl, --live,
// --context, --kubeconfig, the verbs that only read a cluster, explain of
// a pod without -f) is only parsed: its flags and arguments must be
// accepted by the verb; so are the lines after it in the same Example,
// which may read what it wrote (snapshot, then explain -f of the
// snapshot).
func TestHelpExamples(t *testing.T) {
	root := newRootCommand(Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	examples := 0
	for _, cmd := range append([]*cobra.Command{root}, root.Commands()...) {
		clusterBefore := false
		for _, line := range strings.Split(cmd.Example, "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			examples++
			stages := pipeline(t, line)
			parseOnly := clusterBefore || slices.ContainsFunc(stages, needsCluster)
			clusterBefore = parseOnly
			t.Run(cmd.Name()+"/"+line, func(t *testing.T) {
				if parseOnly {
					for _, st := range stages {
						if st[0] == "dractl" {
							parses(t, st[1:])
						}
					}
					return
				}
				var in string
				for _, st := range stages {
					if st[0] != "dractl" {
						if st[0] != "jq" {
							t.Fatalf("stage %q: only dractl and jq stages can run without a cluster", strings.Join(st, " "))
						}
						if !json.Valid([]byte(in)) {
							t.Fatalf("jq would read no JSON:\n%s", in)
						}
						return
					}
					r := run(t, in, st[1:]...)
					if r.code != ExitOK {
						t.Fatalf("%s: exit %d\n%s", strings.Join(st, " "), r.code, r)
					}
					in = r.stdout
				}
			})
		}
	}
	if examples < 10 {
		t.Fatalf("found %d examples; the verbs' Example texts were not read", examples)
	}
}

// pipeline splits an example into the words of its stages, with shell
// quoting ('...' and "...") and a final "> FILE" redirection removed.
func pipeline(t *testing.T, line string) [][]string {
	t.Helper()
	var stages [][]string
	var words []string
	var word strings.Builder
	inWord, redirect := false, false
	var quote rune
	flush := func() {
		if inWord {
			if redirect {
				redirect = false
			} else {
				words = append(words, word.String())
			}
			word.Reset()
			inWord = false
		}
	}
	for _, c := range line {
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(c)
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ':
			flush()
		case c == '|':
			flush()
			stages = append(stages, words)
			words = nil
		case c == '>':
			flush()
			redirect = true
		default:
			word.WriteRune(c)
			inWord = true
		}
	}
	flush()
	if quote != 0 || redirect {
		t.Fatalf("example %q: unterminated quote or redirection", line)
	}
	stages = append(stages, words)
	for _, st := range stages {
		if len(st) == 0 {
			t.Fatalf("example %q: empty stage", line)
		}
	}
	return stages
}

// needsCluster says whether a stage talks to a cluster.
func needsCluster(st []string) bool {
	if st[0] == "kubectl" {
		return true
	}
	if st[0] != "dractl" || len(st) < 2 {
		return false
	}
	switch st[1] {
	case "get", "snapshot", "monitor":
		return true
	}
	for _, w := range st[2:] {
		if w == "--live" || strings.HasPrefix(w, "--context") || strings.HasPrefix(w, "--kubeconfig") {
			return true
		}
	}
	// explain pod/NAME without files reads the pod from the cluster.
	return st[1] == "explain" && !slices.Contains(st, "-f") && slices.ContainsFunc(st, func(w string) bool { return strings.HasPrefix(w, "pod/") })
}

// parses checks that the verb accepts args' flags and arguments, without
// running it.
func parses(t *testing.T, args []string) {
	t.Helper()
	root := newRootCommand(Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Fatalf("dractl %s: no such verb (%v)", strings.Join(args, " "), err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("dractl %s: %v", strings.Join(args, " "), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Fatalf("dractl %s: %v", strings.Join(args, " "), err)
	}
}
