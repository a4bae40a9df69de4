package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v2"
)

// chunk is one "---"-separated piece of a YAML stream.
type chunk struct {
	data []byte
	line int    // 1-based line of the chunk's first byte
	err  string // set for a malformed separator line, which ends the chunk
}

// splitYAML cuts a YAML stream at separator lines, counting lines from
// firstLine. A separator is a line that starts with "---" followed by
// nothing but blanks or a comment, the same rule as apimachinery's
// YAMLReader (and so kubectl), so that files split here exactly where they
// split there. Like YAMLReader, a line starting with "---" followed by
// anything else is an error; the chunk before it is kept, and splitting
// goes on after it so that later documents are still checked. Empty chunks
// are dropped.
func splitYAML(data []byte, firstLine int) []chunk {
	var out []chunk
	start, startLine, line := 0, firstLine, firstLine
	flush := func(end int) {
		if !blankYAML(data[start:end]) || blankButInvalid(data[start:end]) {
			out = append(out, chunk{data: data[start:end], line: startLine})
		}
	}
	i := 0
	for l := range bytes.Lines(data) {
		next := i + len(l)
		if sep, bad := separator(l); sep {
			flush(i)
			if bad != "" {
				out = append(out, chunk{data: l, line: line,
					err: fmt.Sprintf("line %d: invalid YAML document separator %q: only blanks or a comment may follow \"---\"", line, bytes.TrimRight(l, "\r\n"))})
			}
			start, startLine = next, line+1
		}
		i = next
		line++
	}
	flush(len(data))
	return out
}

// separator reports whether line starts with "---", and what follows it
// when that is not allowed.
func separator(line []byte) (sep bool, bad string) {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false, ""
	}
	rest := bytes.TrimSpace(line[3:])
	if len(rest) == 0 || rest[0] == '#' {
		return true, ""
	}
	return true, string(rest)
}

// blankButInvalid reports whether a blank chunk is still not YAML: tabs
// may not start a token, and kubectl fails on them.
func blankButInvalid(b []byte) bool {
	if !bytes.ContainsRune(b, '\t') {
		return false
	}
	var v any
	return yaml.Unmarshal(b, &v) != nil
}

// blankYAML reports whether a chunk holds only blank and comment lines.
func blankYAML(b []byte) bool {
	for line := range bytes.Lines(b) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserProblems are the go-yaml v2 parser (not scanner) messages. The
// parser reports their line 0-based while the scanner's are 1-based.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// yamlError rewrites a go-yaml syntax error so that its line counts from
// the start of the file rather than of the document, and is 1-based.
func yamlError(err error, firstLine int) string {
	msg := err.Error()
	m := yamlLineRE.FindStringSubmatch(msg)
	if m == nil {
		// go-yaml omits the line for problems on a document's first line.
		return msg + " (in the document starting at line " + strconv.Itoa(firstLine) + ")"
	}
	n, convErr := strconv.Atoi(m[1])
	if convErr != nil {
		return msg
	}
	if parserProblems[m[2]] {
		n++
	}
	return "yaml: line " + strconv.Itoa(n+firstLine-1) + ": " + m[2]
}

// yamlToJSON parses one YAML document and converts it to JSON.
//
// It parses with go.yaml.in/yaml/v2, as sigs.k8s.io/yaml does, so scalars
// resolve the same way they do for kubectl. Unlike sigs.k8s.io/yaml it
// decodes mappings into MapSlice, which keeps key order and duplicate keys:
// the JSON written here repeats a duplicated key, and the strict JSON
// decoder then reports it with its full path. The API server gets the same
// result by parsing YAML twice; this parses once.
func yamlToJSON(c chunk) ([]byte, error) {
	if isSequence(c.data) {
		// go-yaml would decode a sequence of mappings into MapSlice as
		// items with neither key nor value.
		return nil, errors.New("expected an object with apiVersion and kind, found a sequence")
	}
	dec := yaml.NewDecoder(bytes.NewReader(c.data))
	var doc yaml.MapSlice
	if err := dec.Decode(&doc); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			// go-yaml's own wording ("cannot unmarshal !!seq into
			// yaml.MapItem") speaks of our Go types, not of the input.
			return nil, errors.New("the document is not a mapping; expected an object with apiVersion and kind")
		}
		return nil, errors.New(yamlError(err, c.line))
	}
	if doc == nil {
		return nil, errors.New("the document is null; expected an object with apiVersion and kind")
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, fmt.Errorf("more than one YAML document without a \"---\" line between them (a document starting at or after line %d)", c.line)
	}
	out := make([]byte, 0, len(c.data)+len(c.data)/4)
	return appendYAML(out, doc, c.data)
}

// isSequence reports whether a YAML document's top-level node is a
// sequence: its first line that is not blank, a comment or a directive
// starts with "[" or is a "-" entry.
func isSequence(data []byte) bool {
	for line := range bytes.Lines(data) {
		t := bytes.TrimSpace(line)
		if len(t) == 0 || t[0] == '#' || t[0] == '%' {
			continue
		}
		return t[0] == '[' || t[0] == '-' && (len(t) == 1 || t[1] == ' ' || t[1] == '\t')
	}
	return false
}

// explainYAMLError words a YAML error for a document that is a Helm chart
// or Go template rather than a manifest: go-yaml's own message then speaks
// of mapping keys and Go types.
func explainYAMLError(data []byte, err error) string {
	if bytes.Contains(data, []byte("{{")) && bytes.Contains(data, []byte("}}")) {
		return "the document contains template directives ({{ ... }}), as in a Helm chart or Go template; " + renderFirst
	}
	return err.Error()
}

const renderFirst = "render it first (helm template, envsubst, ...) and give dractl the result"

// placeholderPattern matches what templated manifests leave for a tool to
// fill in: Go template directives, and shell-style variables as envsubst
// substitutes them (NVIDIA's demo files name objects ${NAME}). A quoted
// directive and a variable are valid YAML, so they reach the object.
var placeholderPattern = regexp.MustCompile(`\{\{.*?\}\}|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`)

// placeholderError reports a name (metadata.name or metadata.namespace)
// that holds a placeholder: a name no object can have, whose fix is to
// render the file, which the name rules kube-apiserver states do not say.
func placeholderError(field, value string) *fieldError {
	p := placeholderPattern.FindString(value)
	if p == "" {
		return nil
	}
	what := "a template directive, as in a Helm chart or Go template"
	if strings.HasPrefix(p, "$") {
		what = "a shell-style variable, as in a templated demo file"
	}
	return &fieldError{field, fmt.Sprintf("%q holds the placeholder %s (%s); %s", value, p, what, renderFirst)}
}

// integerText finds the digits of an integer too large for int64 in the
// document it came from: go-yaml turns it into a float, and the error
// about it should show what the user wrote, not 1e+23.
func integerText(src []byte, v float64) (string, bool) {
	for i := 0; i < len(src); {
		if src[i] < '0' || src[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(src) && src[j] >= '0' && src[j] <= '9' {
			j++
		}
		start := i
		if start > 0 && (src[start-1] == '-' || src[start-1] == '+') {
			start--
		}
		if j-i >= 19 && (i == 0 || src[i-1] == ' ' || src[i-1] == '-' || src[i-1] == '+' || src[i-1] == '[' || src[i-1] == ',') {
			if f, err := strconv.ParseFloat(string(src[start:j]), 64); err == nil && f == v {
				return strings.TrimPrefix(string(src[start:j]), "+"), true
			}
		}
		i = j
	}
	return "", false
}

// appendYAML writes a value produced by go-yaml v2 as JSON, with the same
// conversions sigs.k8s.io/yaml applies to map keys.
//
// src is the document's text, for integers too large for int64, which
// go-yaml returns as floats: they are written with their own digits, the
// same number in JSON, so that errors about them show what was written.
func appendYAML(b []byte, v any, src []byte) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("the value %v cannot be represented in JSON", v)
		}
		if v == math.Trunc(v) && math.Abs(v) >= 1<<63 {
			if digits, ok := integerText(src, v); ok {
				return append(b, digits...), nil
			}
		}
		f, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return append(b, f...), nil
	case string:
		return appendString(b, v), nil
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendYAML(b, e, src); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case yaml.MapSlice:
		b = append(b, '{')
		for i, item := range v {
			if i > 0 {
				b = append(b, ',')
			}
			k, err := yamlKey(item.Key)
			if err != nil {
				return nil, err
			}
			b = appendString(b, k)
			b = append(b, ':')
			if b, err = appendYAML(b, item.Value, src); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case map[any]any:
		// Only reachable through merge keys; order does not matter there.
		keys := make([]string, 0, len(v))
		vals := make(map[string]any, len(v))
		for k, e := range v {
			ks, err := yamlKey(k)
			if err != nil {
				return nil, err
			}
			keys = append(keys, ks)
			vals[ks] = e
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			if b, err = appendYAML(b, vals[k], src); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	default:
		return nil, fmt.Errorf("unsupported YAML value %v", v)
	}
}

// yamlKey turns a mapping key into a JSON member name the way
// sigs.k8s.io/yaml does.
func yamlKey(k any) (string, error) {
	switch k := k.(type) {
	case string:
		return k, nil
	case int:
		return strconv.Itoa(k), nil
	case int64:
		return strconv.FormatInt(k, 10), nil
	case uint64:
		return strconv.FormatUint(k, 10), nil
	case float64:
		s := strconv.FormatFloat(k, 'g', -1, 32)
		switch s {
		case "+Inf":
			s = ".inf"
		case "-Inf":
			s = "-.inf"
		case "NaN":
			s = ".nan"
		}
		return s, nil
	case bool:
		return strconv.FormatBool(k), nil
	case yaml.MapSlice, map[any]any:
		return "", errors.New("a mapping key is itself a mapping; keys must be strings")
	case []any:
		return "", errors.New("a mapping key is a sequence; keys must be strings")
	case nil:
		return "", errors.New("a mapping key is null; keys must be strings")
	default:
		return "", fmt.Errorf("a mapping key (%v) is not a string; keys must be strings", k)
	}
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. The common case (no quotes,
// backslashes or control characters, valid UTF-8) is a plain copy.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		q, _ := json.Marshal(s) // replaces invalid bytes as encoding/json does
		return append(b, q...)
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
