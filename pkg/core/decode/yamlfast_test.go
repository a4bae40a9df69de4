package decode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dractl/dractl/internal/testing/examplegen"
	yaml "go.yaml.in/yaml/v2"
	sigsyaml "sigs.k8s.io/yaml"
)

// fastYAMLSeeds are documents in the subset the fast YAML path takes, and
// around its edges.
var fastYAMLSeeds = []string{
	"apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: s\nspec:\n  driver: d\n  pool:\n    name: p\n    resourceSliceCount: 1\n  allNodes: true\n  devices:\n  - name: a\n    attributes:\n      model:\n        string: H100\n",
	`apiVersion: resource.k8s.io/v1
kind: ResourceSlice   # a comment
metadata:
  name: "s-1"
  labels:
    a: 'b'
    "x/y": ""
    empty:
    yes-no: "yes"
spec:
  driver: gpu.example.com
  allNodes: true
  perDeviceNodeSelection: off
  pool:
    name: p
    generation: 0
    resourceSliceCount: -1
  devices:
  - name: gpu-0
    attributes:
      v:
        version: 9.0.0
      i:
        int: 42
      b:
        bool: True
      s:
        string: NVIDIA H100 80GB HBM3
      t:
        string: 2024-01-01T00:00:00Z
    capacity:
      m:
        value: 1.5Gi
      q:
        value: 1e3
      o:
        value: 0x10
    consumesCounters:
    -   counterSet: cs
        counters: {}
  -
    name: gpu-1
    taints: []
  - name: "with \"escapes\"\t"
    bindingConditions:
    - a
    -  b  # trailing
    - 'it''s'
    - ~
    -
    - null
`,
	"a:\n  - 1\n  - 2\nb:\n- x: 1\n  w: 2\n- z\n",
	"a: 007\nb: +1\nc: -0\nd: .5\ne: 1_000\ng: 0x1f\nh: 1.5e3\n",
	"a: 123456789012345678901234\n",
	"a: .inf\n",
	"a: 1\na: 2\n",
	"  a: 1\n  b:\n    c: d\n",
	"a: b: c\n",
	"a: &x 1\nb: *x\n",
	"a: !!str 1\n",
	"a: |\n  text\n",
	"a: plain\n  continued\n",
	"- a\n- b\n",
	"a:\tb\n",
	"y: 1\n",
	"a: [1, 2]\n",
	"a: {b: c}\n",
	sliceHead + "  devices:\n  - name: a\n    attributes:\n      model: {string: H100}\n",
	"a: caf\xc3\xa9\n",
	"a: \"\\u00e9\"\n",
	"a:\n  b: 1\n c: 2\n",
	"a: b\n- c\n",
}

// checkFastYAML converts data both ways: when the fast path takes it, its
// JSON must be exactly the careful path's.
func checkFastYAML(t *testing.T, data []byte) {
	t.Helper()
	fast, ok := fastYAMLToJSON(data)
	if !ok {
		return
	}
	careful, err := yamlToJSON(chunk{data: data, line: 1})
	if err != nil {
		t.Fatalf("the fast YAML path takes what go-yaml rejects (%v):\n%s", err, data)
	}
	if !bytes.Equal(fast, careful) {
		t.Fatalf("the fast YAML path differs from go-yaml on\n%s\nfast:    %s\ngo-yaml: %s", data, fast, careful)
	}
}

// FuzzFastYAMLMatchesGoYAML: for any document, the fast YAML path either
// gives up or writes exactly the JSON of the go-yaml path.
func FuzzFastYAMLMatchesGoYAML(f *testing.F) {
	for _, s := range fastYAMLSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastYAML(t, data)
	})
}

// generatedYAML is what dractl and sigs.k8s.io/yaml write: a DGX H100
// node's slices in both forms.
func generatedYAML(t *testing.T) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, form := range []examplegen.Form{examplegen.Flat, examplegen.Mixins} {
		for _, s := range examplegen.DGXH100Node.Slices(form) {
			doc, err := sigsyaml.Marshal(s) // as pkg/ops/manifest writes a slice
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, doc)
		}
	}
	return docs
}

// TestFastYAMLTakesKubernetesYAML: the fast path must take what Kubernetes
// tools write, or it saves nothing; and what it takes must match.
func TestFastYAMLTakesKubernetesYAML(t *testing.T) {
	docs := generatedYAML(t)
	docs = append(docs, []byte(fastYAMLSeeds[0]), []byte(fastYAMLSeeds[1]), []byte(fastYAMLSeeds[2]), []byte(fastYAMLSeeds[3]))
	for _, d := range docs {
		if _, ok := fastYAMLToJSON(d); !ok {
			t.Errorf("fast YAML path gives up on\n%s", d)
		}
		checkFastYAML(t, d)
	}
	// Hand-written files use flow mappings, which go to go-yaml; what the
	// fast path takes of them must match.
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range splitYAML(data, 1) {
			checkFastYAML(t, c.data)
		}
	}
}

// TestFastYAMLGivesUp: documents outside the subset go to go-yaml, which
// reads them or words their errors.
func TestFastYAMLGivesUp(t *testing.T) {
	for _, s := range fastYAMLSeeds[4:] { // the first four are in the subset
		if s == "a: 1\na: 2\n" || s == "  a: 1\n  b:\n    c: d\n" || s == "a: \"\\u00e9\"\n" {
			continue // in the subset
		}
		if j, ok := fastYAMLToJSON([]byte(s)); ok {
			t.Errorf("fast YAML path took %q, giving %s", s, j)
		}
	}
}

// TestYAMLWordsMatchGoYAML checks yamlWords, and the words next to them,
// against go-yaml itself, as values and as keys.
func TestYAMLWordsMatchGoYAML(t *testing.T) {
	words := []string{"yes!", "Yes.", "yEs", "tRue", "nULL", "nul", "o", "On.", "oN", "Off", "nope", "Nn", "t", "f", "F", "T", "NaN", "Inf", "nan"}
	for w := range yamlWords {
		words = append(words, w, strings.ToLower(w), strings.ToUpper(w), w+"x")
	}
	for _, w := range words {
		checkFastYAML(t, []byte("a: "+w+"\n"))
		checkFastYAML(t, []byte(w+": a\n"))
		checkFastYAML(t, []byte("a:\n- "+w+"\n"))
	}
	// Every word of the table really is what go-yaml makes of it.
	for w, want := range yamlWords {
		var m yaml.MapSlice
		if err := yaml.Unmarshal([]byte("v: "+w), &m); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(m[0].Value); got != map[string]string{"true": "true", "false": "false", "null": "<nil>"}[want] {
			t.Errorf("go-yaml reads %q as %s, yamlWords says %s", w, got, want)
		}
	}
}

// TestFastYAMLMatchesGoYAMLMutated runs the fuzz property over many
// line-level mutations of the seeds and of generated slices: indentation
// moved, lines dropped, doubled and swapped, scalars replaced by values
// that resolve in every way, and indicators put where they change the
// meaning.
func TestFastYAMLMatchesGoYAMLMutated(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var seeds [][]byte
	for _, s := range fastYAMLSeeds {
		seeds = append(seeds, []byte(s))
	}
	for _, d := range generatedYAML(t) {
		if len(d) < 4000 {
			seeds = append(seeds, d)
		} else {
			seeds = append(seeds, d[:bytes.IndexByte(d[3000:], '\n')+3001]) // a prefix, cut at a line end
		}
	}
	n := 6000
	if testing.Short() {
		n = 600
	}
	taken := 0
	for range n {
		b := bytes.Clone(seeds[rng.IntN(len(seeds))])
		for range 1 + rng.IntN(3) {
			b = mutateYAML(rng, b)
		}
		if _, ok := fastYAMLToJSON(b); ok {
			taken++
		}
		checkFastYAML(t, b)
		checkFastMatchesCareful(t, b)
	}
	if taken < n/10 {
		t.Errorf("the fast path took only %d of %d mutated documents: the test checks too little", taken, n)
	}
}

// yamlScalars are values that go-yaml resolves in every way it can.
var yamlScalars = []string{
	"a", "abc def", "x:y", "a#b", "a #b", "1", "-1", "0", "-0", "01", "1.0", "1e3", "0x1f", "0o17", "0b101", "1_000", "+1",
	".5", "-.5", "1.", ".inf", "-.Inf", ".nan", "~", "null", "Null", "true", "yes", "No", "off", "y", "9.0.0", "12.6.0",
	"2024-01-01", "2024-01-01T00:00:00Z", "123456789012345678901234", "-9223372036854775809", "9223372036854775807",
	"18446744073709551615", "18446744073709551616", `""`, `''`, `"a\"b"`, `'a''b'`, `"\t"`, `"\x41"`, `"\u00e9"`, `"a`, `'a`,
	"{}", "[]", "{ }", "[a]", "{a: b}", "&a x", "*a", "!!str 1", "!x y", "|", ">", "- a", "-", "? a", "%a", "@a", "`a",
	"a: b", "a:", "a ", " a", "a # c", "\"a\" # c", "\"a\"x", "'a' b", "1Gi", "80Gi", "9984Mi", "100m", "Hopper",
}

// mutateYAML changes b at one line.
func mutateYAML(rng *rand.Rand, b []byte) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) == 0 {
		return b
	}
	i := rng.IntN(len(lines))
	line := lines[i]
	switch rng.IntN(8) {
	case 0: // indent differently
		if rng.IntN(2) == 0 {
			line = append([]byte(strings.Repeat(" ", 1+rng.IntN(2))), line...)
		} else {
			line = bytes.TrimPrefix(line, []byte(strings.Repeat(" ", 1+rng.IntN(2))))
		}
	case 1: // drop the line
		line = nil
	case 2: // double it
		line = append(bytes.Clone(line), line...)
	case 3: // swap with the next
		if i+1 < len(lines) {
			lines[i+1], line = line, lines[i+1]
		}
	case 4, 5: // replace a value (after ": " or "- ")
		v := yamlScalars[rng.IntN(len(yamlScalars))]
		if k := bytes.Index(line, []byte(": ")); k >= 0 {
			line = []byte(string(line[:k+2]) + v + "\n")
		} else if k := bytes.Index(line, []byte("- ")); k >= 0 {
			line = []byte(string(line[:k+2]) + v + "\n")
		} else {
			line = []byte(strings.TrimRight(string(line), "\n") + " " + v + "\n")
		}
	case 6: // replace a key
		if k := bytes.IndexByte(line, ':'); k >= 0 {
			start := len(line) - len(bytes.TrimLeft(line, " -"))
			if start < k {
				line = []byte(string(line[:start]) + yamlScalars[rng.IntN(len(yamlScalars))] + string(line[k:]))
			}
		}
	default: // put a byte somewhere
		if len(line) > 0 {
			k := rng.IntN(len(line))
			c := []byte(" -:#'\"{}[],&*!|>?%@\t\x00\xc3\r")[rng.IntN(22)]
			line = append(line[:k:k], append([]byte{c}, line[k:]...)...)
		}
	}
	lines[i] = line
	return bytes.Join(lines, nil)
}

// TestYAMLWord: the filter in front of yamlWords loses no word.
func TestYAMLWord(t *testing.T) {
	for w, want := range yamlWords {
		if got, ok := yamlWord([]byte(w)); !ok || got != want {
			t.Errorf("yamlWord(%q) = %q, %v; want %q", w, got, ok, want)
		}
	}
	for _, s := range []string{"value", "name", "nope", "yess", "Trues", "o", "x"} {
		if got, ok := yamlWord([]byte(s)); ok {
			t.Errorf("yamlWord(%q) = %q; it is no YAML 1.1 word", s, got)
		}
	}
}

// TestYAMLSlicesKeepNoPooledMemory: the JSON of a YAML slice is written
// into pooled memory that later documents reuse; nothing decoded from it
// may still point there.
func TestYAMLSlicesKeepNoPooledMemory(t *testing.T) {
	stream := func(tag string) []byte {
		var b strings.Builder
		for i := range 4 {
			fmt.Fprintf(&b, `---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: %[1]s-%[2]d
  labels:
    %[1]s: %[1]s-label
spec:
  driver: %[1]s.example.com
  nodeName: %[1]s-node
  pool:
    name: %[1]s-pool
    resourceSliceCount: 4
  devices:
  - name: %[1]s-dev
    attributes:
      %[1]s/model:
        string: %[1]s-model
      %[1]s/driverVersion:
        version: 1.2.3-%[1]s
    capacity:
      %[1]s/memory:
        value: 8Gi
`, tag, i)
		}
		return []byte(b.String())
	}
	first := stream("aaaa")
	got, err := Bytes("a.yaml", first)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := Bytes("b.yaml", stream("zzzz")); err != nil {
			t.Fatal(err)
		}
	}
	want, werr, _ := decodeInputsMode([]input{{name: "a.yaml", data: first}}, false, DefaultMaxObjectBytes)
	if werr != nil {
		t.Fatal(werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("slices decoded from YAML changed when later documents were decoded:\n got %+v\nwant %+v", got, want)
	}
}
