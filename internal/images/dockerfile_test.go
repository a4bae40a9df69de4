package images

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repoRoot is the repository root, from this package's directory.
const repoRoot = "../.."

// stage is one FROM of a Dockerfile, with what the test reads of it.
type stage struct {
	base, name string
	runs       []string
	copies     []copyInstr
	user       string
	entrypoint []string
}

// copyInstr is a COPY: the stage it copies from ("" for the build
// context), its sources and its destination.
type copyInstr struct {
	from, dst string
	srcs      []string
}

// parseDockerfile reads the instructions the project's Dockerfiles use;
// any other instruction fails, so that a Dockerfile cannot do something
// the comparison does not see.
func parseDockerfile(t *testing.T, file string) []*stage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	var stages []*stage
	var line string
	for n, raw := range strings.Split(string(data), "\n") {
		raw = strings.TrimSpace(raw)
		if strings.HasPrefix(raw, "#") || (raw == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(raw, "\\"); ok {
			line += cont + " "
			continue
		}
		line += raw
		instr, rest, _ := strings.Cut(line, " ")
		line = ""
		rest = strings.TrimSpace(rest)
		where := fmt.Sprintf("%s:%d", file, n+1)
		if instr != "FROM" && len(stages) == 0 {
			t.Fatalf("%s: %s before FROM", where, instr)
		}
		var cur *stage
		if len(stages) > 0 {
			cur = stages[len(stages)-1]
		}
		switch strings.ToUpper(instr) {
		case "FROM":
			words := strings.Fields(rest)
			s := &stage{base: words[0]}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				s.name = words[2]
			} else if len(words) != 1 {
				t.Fatalf("%s: FROM %s", where, rest)
			}
			stages = append(stages, s)
		case "RUN":
			cur.runs = append(cur.runs, rest)
		case "COPY":
			words := strings.Fields(rest)
			from := ""
			if f, ok := strings.CutPrefix(words[0], "--from="); ok {
				from, words = f, words[1:]
			}
			if len(words) < 2 {
				t.Fatalf("%s: COPY %s: want a source and a destination", where, rest)
			}
			cur.copies = append(cur.copies, copyInstr{from: from, srcs: words[:len(words)-1], dst: words[len(words)-1]})
		case "USER":
			cur.user = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &cur.entrypoint); err != nil {
				t.Fatalf("%s: ENTRYPOINT %s: want the exec form (a JSON array): %v", where, rest, err)
			}
		case "WORKDIR", "ARG":
			// WORKDIR /src is where the repository is copied: the root.
		default:
			t.Fatalf("%s: instruction %s is not read by this test", where, instr)
		}
	}
	return stages
}

// shellWords splits a command as sh does for the simple commands the
// Dockerfiles run: words, double and single quotes.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unterminated quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// built is what a build stage's `go build` of one binary says.
type built struct {
	Binary
	Trimpath bool
}

// goBuilds reads the `go build` commands of a stage's RUN lines, by the
// output path.
func goBuilds(t *testing.T, file string, s *stage) map[string]built {
	t.Helper()
	out := map[string]built{}
	for _, run := range s.runs {
		dir := "."
		for _, cmd := range strings.Split(run, "&&") {
			words := shellWords(t, strings.TrimSpace(cmd))
			if len(words) == 2 && words[0] == "cd" {
				dir = path.Join(dir, words[1])
				continue
			}
			env := map[string]string{}
			for len(words) > 0 && strings.Contains(words[0], "=") {
				k, v, _ := strings.Cut(words[0], "=")
				env[k] = v
				words = words[1:]
			}
			if len(words) < 2 || words[0] != "go" || words[1] != "build" {
				continue
			}
			// Go builds with cgo when a C compiler is there, as in
			// the golang image.
			b := built{Binary: Binary{Module: dir, Cgo: env["CGO_ENABLED"] != "0"}}
			var dest string
			for i := 2; i < len(words); i++ {
				switch w := words[i]; {
				case w == "-trimpath":
					b.Trimpath = true
				case w == "-o":
					i++
					dest = words[i]
				case w == "-tags":
					i++
					b.Tags = words[i]
				case w == "-ldflags":
					i++
					flags := strings.Fields(words[i])
					for j := 0; j < len(flags); j++ {
						switch {
						case flags[j] == "-s" || flags[j] == "-w":
							b.Strip = true
						case flags[j] == "-X" && j+1 < len(flags) && strings.HasPrefix(flags[j+1], VersionVar+"="):
							b.Version = true
							j++
						default:
							t.Errorf("%s: go build -ldflags %q: %s is not a flag the image builder sets", file, words[i], flags[j])
						}
					}
				case strings.HasPrefix(w, "-"):
					t.Errorf("%s: go build flag %s is not one the image builder sets", file, w)
				default:
					b.Package = w
				}
			}
			if dest == "" || b.Package == "" {
				t.Errorf("%s: %q: want -o and a package", file, cmd)
				continue
			}
			out[dest] = b
		}
	}
	return out
}

// TestDockerfiles holds each image's Dockerfile to the table: the same
// binaries at the same paths, built from the same packages with the same
// cgo setting and flags, the same entrypoint and user, on a base with a C
// library exactly when a binary uses cgo.
func TestDockerfiles(t *testing.T) {
	for _, img := range Images {
		t.Run(strings.TrimSuffix(img.Key+"-"+img.Minor, "-"), func(t *testing.T) {
			stages := parseDockerfile(t, img.Dockerfile)
			final := stages[len(stages)-1]
			byName := map[string]*stage{}
			for _, s := range stages {
				byName[s.name] = s
			}
			var got []Binary
			for _, c := range final.copies {
				from, dst := c.from, c.dst
				if len(c.srcs) != 1 {
					t.Errorf("%s: COPY %v %s: the final stage copies one binary at a time", img.Dockerfile, c.srcs, dst)
					continue
				}
				src := c.srcs[0]
				s := byName[from]
				if from == "" || s == nil {
					t.Errorf("%s: COPY %s %s: not from a build stage", img.Dockerfile, src, dst)
					continue
				}
				b, ok := goBuilds(t, img.Dockerfile, s)[src]
				if !ok {
					t.Errorf("%s: COPY --from=%s %s: no go build in that stage writes it", img.Dockerfile, from, src)
					continue
				}
				if !b.Trimpath {
					t.Errorf("%s: %s is built without -trimpath, which the image builder builds with", img.Dockerfile, src)
				}
				b.Path = dst
				// A binary that needs a newer Go than the machine's is
				// built on the golang image of that Go.
				for _, want := range img.Binaries {
					if want.Path != dst || want.Toolchain == "" {
						continue
					}
					if goVersion, ok := strings.CutPrefix(s.base, "golang:"); ok && strings.HasPrefix(want.Toolchain, "go"+goVersion+".") {
						b.Toolchain = want.Toolchain
					} else {
						t.Errorf("%s: %s is built FROM %s, the table builds it with %s", img.Dockerfile, dst, s.base, want.Toolchain)
					}
				}
				got = append(got, b.Binary)
			}
			if diff := cmp.Diff(img.Binaries, got); diff != "" {
				t.Errorf("%s: binaries (-table +Dockerfile):\n%s", img.Dockerfile, diff)
			}
			if !cmp.Equal(img.Entrypoint, final.entrypoint) {
				t.Errorf("%s: ENTRYPOINT %q, the table has %q", img.Dockerfile, final.entrypoint, img.Entrypoint)
			}
			user := final.user
			if user == "" && strings.HasSuffix(final.base, ":nonroot") {
				user = NonRoot
			}
			if user != img.User {
				t.Errorf("%s: runs as %q, the table has %q", img.Dockerfile, user, img.User)
			}
			cgo := false
			for _, b := range img.Binaries {
				cgo = cgo || b.Cgo
			}
			if static := strings.Contains(final.base, "distroless/static"); static == cgo {
				t.Errorf("%s: base %s for an image whose binaries use cgo: %v (a static base has no C library)", img.Dockerfile, final.base, cgo)
			}
		})
	}
}
