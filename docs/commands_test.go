package docs

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the output shown in README.md and docs/**/*.md from what the commands print")

// TestDocCommands runs every command the documentation shows and holds
// the output shown beside it to what the command prints, so that no page
// shows output the product no longer gives.
//
// A command is a line starting with "$ " inside a ```console block of
// README.md or of a page under docs/. Its output is what follows, up to
// the next command or the end of the block, trailing blank lines left
// out. A last line "[exit N]" is the exit status the command must end
// with; without it, the command must succeed. A last line "..." shows
// only the first lines of the output, which must then begin with them.
// Commands run with bash from the repository root, with the dractl built
// from this checkout first on PATH, and nothing of the caller's
// environment but PATH.
//
// Commands that need a cluster cannot run here: a block after the line
// "<!-- golden: A B ... -->" shows, for its i-th command, the golden file
// named i-th, which the e2e tests write from the live command
// (make e2e-golden) and hold to it. Such a block's output is held to its
// golden file instead of being run.
//
// With -update the shown outputs are rewritten; review the diff.
func TestDocCommands(t *testing.T) {
	pages := []string{filepath.Join(repoRoot, "README.md")}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-buildvcs=false", "-o", filepath.Join(bin, "dractl"), "./cmd/dractl")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/dractl: %v\n%s", err, out)
	}
	run := func(cmd string) (string, int) {
		c := exec.Command("bash", "-c", cmd)
		c.Dir = repoRoot
		c.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8", "TZ=UTC"}
		out, err := c.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return string(out), 0
	}
	total := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join("docs", page)
		if page == pages[0] {
			name = "README.md"
		}
		doc := parseDoc(string(data))
		for _, cmd := range doc.commands {
			total++
			var got string
			if cmd.golden != "" {
				g, err := os.ReadFile(filepath.Join(repoRoot, cmd.golden))
				if err != nil {
					t.Errorf("%s:%d: %s: %v", name, cmd.line, cmd.text, err)
					continue
				}
				got = string(g)
			} else {
				var code int
				got, code = run(cmd.text)
				if code != cmd.exit && !*update {
					t.Errorf("%s:%d: %s: exit %d, the page shows %d\n%s", name, cmd.line, cmd.text, code, cmd.exit, got)
					continue
				}
				if code != 0 {
					cmd.exitShown = true
				}
				cmd.exit = code
			}
			gotLines := strings.Split(strings.TrimRight(got, "\n"), "\n")
			if strings.TrimRight(got, "\n") == "" {
				gotLines = nil
			}
			if cmd.truncated {
				if len(gotLines) < len(cmd.output) || !equalLines(gotLines[:len(cmd.output)], cmd.output) {
					if *update {
						cmd.output = gotLines[:min(len(cmd.output), len(gotLines))]
						continue
					}
					t.Errorf("%s:%d: %s: the output does not begin with what the page shows\n%s", name, cmd.line, cmd.text, diffLines(cmd.output, gotLines[:min(len(cmd.output), len(gotLines))]))
				}
				continue
			}
			if !equalLines(gotLines, cmd.output) {
				if *update {
					cmd.output = gotLines
					continue
				}
				t.Errorf("%s:%d: %s: the output differs from what the page shows (-page +printed)\n%s", name, cmd.line, cmd.text, diffLines(cmd.output, gotLines))
			}
		}
		if *update {
			if out := doc.render(); out != string(data) {
				if err := os.WriteFile(page, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if total == 0 {
		t.Fatal("the documentation shows no commands")
	}
	t.Logf("%d commands in %d pages", total, len(pages))
}

// docCommand is one "$ " line of a console block and the output shown
// after it.
type docCommand struct {
	line      int
	text      string
	output    []string
	exit      int
	exitShown bool
	truncated bool
	golden    string
}

// docPage is a page split into the text around its commands and the
// commands, so that -update can write it back with new outputs.
type docPage struct {
	parts    []string // text before commands[i] is parts[i]; parts has one more
	commands []*docCommand
}

var (
	goldenMarker = regexp.MustCompile(`^<!-- golden: (.*) -->$`)
	exitLine     = regexp.MustCompile(`^\[exit (\d+)\]$`)
)

func parseDoc(data string) *docPage {
	lines := strings.Split(data, "\n")
	p := &docPage{}
	var text strings.Builder
	var goldens []string
	inBlock := false
	var cur *docCommand
	flush := func() {
		if cur == nil {
			return
		}
		out := cur.output
		blank := 0
		for len(out) > 0 && out[len(out)-1] == "" {
			out = out[:len(out)-1]
			blank++
		}
		if len(out) > 0 {
			if m := exitLine.FindStringSubmatch(out[len(out)-1]); m != nil {
				cur.exit, _ = strconv.Atoi(m[1])
				cur.exitShown = true
				out = out[:len(out)-1]
			}
		}
		if len(out) > 0 && out[len(out)-1] == "..." {
			cur.truncated = true
			out = out[:len(out)-1]
		}
		cur.output = out
		p.commands = append(p.commands, cur)
		for ; blank > 0; blank-- {
			text.WriteString("\n")
		}
		cur = nil
	}
	for i, line := range lines {
		last := i == len(lines)-1
		nl := "\n"
		if last {
			nl = ""
		}
		switch {
		case !inBlock && strings.HasPrefix(line, "```console"):
			inBlock = true
			text.WriteString(line + nl)
		case !inBlock:
			if m := goldenMarker.FindStringSubmatch(line); m != nil {
				goldens = strings.Fields(m[1])
			}
			text.WriteString(line + nl)
		case strings.HasPrefix(line, "```"):
			flush()
			inBlock = false
			goldens = nil
			text.WriteString(line + nl)
		case strings.HasPrefix(line, "$ "):
			flush()
			p.parts = append(p.parts, text.String())
			text.Reset()
			cur = &docCommand{line: i + 1, text: strings.TrimPrefix(line, "$ ")}
			if len(goldens) > 0 {
				cur.golden, goldens = goldens[0], goldens[1:]
			}
		case cur != nil:
			cur.output = append(cur.output, line)
		default:
			text.WriteString(line + nl)
		}
	}
	p.parts = append(p.parts, text.String())
	return p
}

func (p *docPage) render() string {
	var b strings.Builder
	for i, c := range p.commands {
		b.WriteString(p.parts[i])
		b.WriteString("$ " + c.text + "\n")
		for _, l := range c.output {
			b.WriteString(l + "\n")
		}
		if c.truncated {
			b.WriteString("...\n")
		}
		if c.exitShown {
			fmt.Fprintf(&b, "[exit %d]\n", c.exit)
		}
	}
	b.WriteString(p.parts[len(p.parts)-1])
	return b.String()
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// diffLines shows the first lines where the page and the output differ.
func diffLines(page, got []string) string {
	var b bytes.Buffer
	shown := 0
	for i := 0; i < max(len(page), len(got)) && shown < 12; i++ {
		var p, g string
		if i < len(page) {
			p = page[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if p == g && i < len(page) && i < len(got) {
			continue
		}
		if i < len(page) {
			fmt.Fprintf(&b, "-%s\n", p)
		}
		if i < len(got) {
			fmt.Fprintf(&b, "+%s\n", g)
		}
		shown++
	}
	return b.String()
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile("(?m)^#+ (.+)$")
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// TestDocLinks checks that every relative link of README.md and of the
// pages under docs/ names a file or directory that exists and, where it
// names a heading of a page (#anchor), a heading that page has, so that
// moving a page or renaming a section does not leave a reader at nothing.
func TestDocLinks(t *testing.T) {
	pages := []string{filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "e2e", "README.md"), filepath.Join(repoRoot, "deploy", "helm", "dractl", "README.md")}
	more, _ := filepath.Glob("*.md")
	pages = append(pages, more...)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		a := map[string]bool{}
		data, err := os.ReadFile(page)
		if err == nil {
			for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(data), ""), -1) {
				a[slug(m[1])] = true
			}
		}
		anchors[page] = a
		return a
	}
	links := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(data), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: %s does not exist", page, target, path)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, path, anchor)
			}
		}
	}
	if links == 0 {
		t.Fatal("no links found")
	}
}

// slug is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, punctuation other than hyphens and underscores dropped.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	h = strings.NewReplacer("`", "", "*", "").Replace(h)
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && (r < 0x2000 || r > 0x206f):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// makeCommand is `make TARGET` in inline code, or at the start of an
// indented code line: a command the reader is told to run, not the verb.
var makeCommand = regexp.MustCompile("(?m)(?:`|^    )(?:[A-Z_]+=\\S+ )*make ([a-z][a-z0-9.-]*)")

// TestDocMakeTargets checks that every `make TARGET` README.md and the
// pages under docs/ tell a reader to run is a target of the Makefile, so
// that a renamed or removed target does not leave instructions that fail.
// (What the targets do is run by CI, which runs make test, demo, soak,
// conformance and schedperf.)
func TestDocMakeTargets(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9.-]*)\s*:`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	pages := []string{filepath.Join(repoRoot, "README.md")}
	more, _ := filepath.Glob("*.md")
	pages = append(pages, more...)
	named := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range makeCommand.FindAllStringSubmatch(string(data), -1) {
			named++
			if !targets[m[1]] {
				t.Errorf("%s: `make %s`: the Makefile has no target %s", page, m[1], m[1])
			}
		}
	}
	if named == 0 {
		t.Fatal("the documentation names no make target")
	}
	t.Logf("%d make commands", named)
}
