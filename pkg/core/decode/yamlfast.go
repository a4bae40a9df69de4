package decode

import (
	"math"
	"sync"

	yaml "go.yaml.in/yaml/v2"
)

// The fast YAML path converts the block-style YAML that Kubernetes tools
// write (kubectl, sigs.k8s.io/yaml, Helm output) to JSON in one pass over
// the lines, some ten times faster than go-yaml, whose parse builds a
// token, an event and a Go value for every scalar.
//
// It takes only a plain subset: printable ASCII; block mappings and block
// sequences (including "- key: value" items and sequences written at their
// key's indentation); keys that are plain words or quoted strings without
// escapes; values that are plain scalars on one line, quoted strings on one
// line, and the empty flow collections {} and []; comments. Scalars are
// resolved as go-yaml v2 resolves them: words and canonical integers here
// (yamlWords), anything else (versions, floats, escapes) by go-yaml itself,
// remembered in scalarCache. On anything else (anchors, tags, block
// scalars, flow collections, multi-line scalars, tabs, non-ASCII, odd
// indentation, and everything that is not YAML at all) it gives up, and
// the document takes the go-yaml path, which also words the errors.
//
// When it does not give up, its JSON is byte for byte what yamlToJSON
// writes: FuzzFastYAMLMatchesGoYAML and the tests in yamlfast_test.go
// check it.

// fastYAMLToJSON converts one YAML document to JSON, or reports that the
// document is outside the subset.
func fastYAMLToJSON(data []byte) ([]byte, bool) { return fastYAMLToJSONInto(nil, data) }

// fastYAMLToJSONInto is fastYAMLToJSON writing into buf's memory when it
// has room (the JSON is about a quarter longer than block-style YAML).
func fastYAMLToJSONInto(buf, data []byte) ([]byte, bool) {
	for _, c := range data {
		if c != '\n' && (c < 0x20 || c > 0x7e) {
			return nil, false
		}
	}
	if n := len(data) + len(data)/4; cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	p := blockParser{src: data, out: buf[:0]}
	p.next(0)
	if p.eof || p.isSeqEntry() {
		return nil, false
	}
	if !p.mapping(p.ind) || !p.eof {
		return nil, false
	}
	return p.out, true
}

// blockParser walks the significant lines of a document (not blank, not a
// comment). The current line's content starts at cont, at column ind; a
// consumed "- " moves both past it, so that a mapping that starts on an
// item's line lines up with its later keys.
type blockParser struct {
	src []byte
	out []byte

	pos  int // where the current line starts
	cont int // where its content starts
	end  int // where it ends (its '\n' or the end of src)
	ind  int // the column of cont
	eof  bool
}

// next moves to the first significant line at or after offset i.
func (p *blockParser) next(i int) {
	src := p.src
	for i < len(src) {
		start := i
		for i < len(src) && src[i] == ' ' {
			i++
		}
		end := i
		for end < len(src) && src[end] != '\n' {
			end++
		}
		if i == end || src[i] == '#' {
			i = end + 1
			continue
		}
		p.pos, p.cont, p.end, p.ind = start, i, end, i-start
		return
	}
	p.eof = true
}

func (p *blockParser) advance() { p.next(p.end + 1) }

// isSeqEntry reports whether the current content is a "- " item.
func (p *blockParser) isSeqEntry() bool {
	return p.src[p.cont] == '-' && (p.cont+1 == p.end || p.src[p.cont+1] == ' ')
}

// node parses the block collection starting at the current line.
func (p *blockParser) node() bool {
	if p.isSeqEntry() {
		return p.sequence(p.ind)
	}
	return p.mapping(p.ind)
}

// mapping parses a block mapping whose keys are at column ind.
func (p *blockParser) mapping(ind int) bool {
	p.out = append(p.out, '{')
	first := true
	for !p.eof && p.ind >= ind {
		if p.ind > ind || p.isSeqEntry() {
			return false
		}
		key, rest, ok := p.key()
		if !ok {
			return false
		}
		if !first {
			p.out = append(p.out, ',')
		}
		first = false
		p.out = appendASCII(p.out, key)
		p.out = append(p.out, ':')
		if p.emptyFrom(rest) {
			p.advance()
			switch {
			case !p.eof && p.ind > ind:
				if !p.node() {
					return false
				}
			case !p.eof && p.ind == ind && p.isSeqEntry():
				// A sequence written at its key's indentation, as
				// kubectl and sigs.k8s.io/yaml write them.
				if !p.sequence(ind) {
					return false
				}
			default:
				p.out = append(p.out, "null"...)
			}
			continue
		}
		if !p.scalar(rest) {
			return false
		}
		p.advance()
	}
	p.out = append(p.out, '}')
	return true
}

// sequence parses a block sequence whose "-" are at column ind.
func (p *blockParser) sequence(ind int) bool {
	p.out = append(p.out, '[')
	first := true
	for !p.eof && p.ind == ind && p.isSeqEntry() {
		if !first {
			p.out = append(p.out, ',')
		}
		first = false
		c := p.cont + 1
		for c < p.end && p.src[c] == ' ' {
			c++
		}
		if c == p.end || p.src[c] == '#' {
			p.advance()
			if !p.eof && p.ind > ind {
				if !p.node() {
					return false
				}
			} else {
				p.out = append(p.out, "null"...)
			}
			continue
		}
		p.cont, p.ind = c, c-p.pos
		if p.isSeqEntry() {
			return false // "- - x"
		}
		if _, _, isKey := p.key(); isKey {
			if !p.mapping(p.ind) {
				return false
			}
			continue
		}
		if !p.scalar(c) {
			return false
		}
		p.advance()
		if !p.eof && p.ind > ind {
			return false // a scalar continued on the next line
		}
	}
	if !p.eof && p.ind > ind {
		return false
	}
	p.out = append(p.out, ']')
	return true
}

// emptyFrom reports whether the current line holds nothing but blanks and
// a comment from i on.
func (p *blockParser) emptyFrom(i int) bool {
	for i < p.end && p.src[i] == ' ' {
		i++
	}
	return i == p.end || p.src[i] == '#'
}

// maxSimpleKey is go-yaml's limit on the length of an implicit key.
const maxSimpleKey = 1024

// key reads the mapping key at the start of the current content: a plain
// word or a quoted string without escapes, followed by ':' and a blank or
// the end of the line. rest is where the value may start.
func (p *blockParser) key() (key []byte, rest int, ok bool) {
	src, i := p.src, p.cont
	switch c := src[i]; {
	case c == '"' || c == '\'':
		j := i + 1
		for j < p.end && src[j] != c && src[j] != '\\' {
			j++
		}
		if j == p.end || src[j] != c {
			return nil, 0, false
		}
		key = src[i+1 : j]
		i = j + 1
	case isLetter(c):
		j := i + 1
		for j < p.end && keyByte[src[j]] {
			j++
		}
		key = src[i:j]
		if _, special := yamlWord(key); special {
			return nil, 0, false // go-yaml makes it a bool or null
		}
		i = j
	default:
		return nil, 0, false
	}
	if i-p.cont > maxSimpleKey || i >= p.end || src[i] != ':' || i+1 < p.end && src[i+1] != ' ' {
		return nil, 0, false
	}
	return key, i + 1, true
}

// scalar writes the value that starts at i on the current line as JSON.
func (p *blockParser) scalar(i int) bool {
	src := p.src
	for i < p.end && src[i] == ' ' {
		i++
	}
	switch c := src[i]; {
	case c == '"' || c == '\'':
		return p.quoted(i)
	case c == '{' || c == '[':
		if i+1 >= p.end || src[i+1] != c+2 || !p.emptyFrom(i+2) { // '{'+2 is '}', '['+2 is ']'
			return false
		}
		if c == '{' {
			p.out = append(p.out, "{}"...)
		} else {
			p.out = append(p.out, "[]"...)
		}
		return true
	case isLetter(c) || c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == '~':
	default:
		return false // an indicator: anchor, alias, tag, block scalar, ...
	}
	// A plain scalar ends at the end of the line or at a comment.
	j := i
	for j < p.end {
		c := src[j]
		if c == '#' {
			if src[j-1] != ' ' {
				return false
			}
			break
		}
		if !plainByte[c] || c == ':' && (j+1 == p.end || src[j+1] == ' ') {
			return false
		}
		j++
	}
	for src[j-1] == ' ' {
		j--
	}
	s := src[i:j]
	if isLetter(s[0]) {
		if v, ok := yamlWord(s); ok {
			p.out = append(p.out, v...)
		} else {
			p.out = appendASCII(p.out, s)
		}
		return true
	}
	if canonicalInt(s) {
		p.out = append(p.out, s...)
		return true
	}
	return p.resolved(s)
}

// quoted writes a quoted scalar that starts at i and ends on this line.
// Escapes are left to go-yaml.
func (p *blockParser) quoted(i int) bool {
	src, q := p.src, p.src[i]
	j, escaped := i+1, false
	for ; j < p.end; j++ {
		if src[j] == '\\' && q == '"' {
			escaped = true
			j++
			continue
		}
		if src[j] == q {
			if q == '\'' && j+1 < p.end && src[j+1] == '\'' {
				escaped = true
				j++
				continue
			}
			break
		}
	}
	if j >= p.end || !p.emptyFrom(j+1) || j+1 < p.end && src[j+1] != ' ' {
		return false
	}
	if escaped {
		return p.resolved(src[i : j+1])
	}
	p.out = appendASCII(p.out, src[i+1:j])
	return true
}

// resolved writes a scalar as go-yaml resolves it.
func (p *blockParser) resolved(s []byte) bool {
	j, ok := scalarJSON(s)
	if ok {
		p.out = append(p.out, j...)
	}
	return ok
}

// scalarCache remembers how go-yaml resolves the scalars the fast path
// cannot resolve itself: version strings and the like recur in every
// device. It stops growing at scalarCacheMax entries.
var scalarCache struct {
	sync.RWMutex
	m map[string][]byte
}

const scalarCacheMax = 4096

// scalarJSON is the JSON of one scalar as written in YAML, resolved by
// go-yaml as the value of a mapping. ok is false for a value that is not a
// plain scalar there, and for integers too large for int64, whose JSON
// yamlToJSON takes from the whole document (integerText).
func scalarJSON(s []byte) ([]byte, bool) {
	scalarCache.RLock()
	j, ok := scalarCache.m[string(s)]
	scalarCache.RUnlock()
	if ok {
		return j, j != nil
	}
	doc := append([]byte("v: "), s...)
	var m yaml.MapSlice
	if err := yaml.Unmarshal(doc, &m); err == nil && len(m) == 1 && m[0].Key == "v" {
		switch v := m[0].Value.(type) {
		case string, bool, nil, int, int64, uint64:
			j, _ = appendYAML(nil, v, doc)
		case float64:
			if !(v == math.Trunc(v) && math.Abs(v) >= 1<<63) {
				j, _ = appendYAML(nil, v, doc)
			}
		}
	}
	scalarCache.Lock()
	if scalarCache.m == nil {
		scalarCache.m = map[string][]byte{}
	}
	if len(scalarCache.m) < scalarCacheMax {
		scalarCache.m[string(s)] = j
	}
	scalarCache.Unlock()
	return j, j != nil
}

// canonicalInt reports whether s is a decimal integer that go-yaml reads
// as itself: no sign but '-', no leading zero, no '_', and small enough.
func canonicalInt(s []byte) bool {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 18 || s[0] == '0' && (neg || len(s) > 1) {
		return false // "-0" is 0, "007" is octal
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// yamlWords are the plain words go-yaml v2 resolves to booleans and null
// (YAML 1.1), as JSON. Other plain scalars starting with a letter are
// strings.
var yamlWords = map[string]string{
	"y": "true", "Y": "true", "yes": "true", "Yes": "true", "YES": "true",
	"true": "true", "True": "true", "TRUE": "true", "on": "true", "On": "true", "ON": "true",
	"n": "false", "N": "false", "no": "false", "No": "false", "NO": "false",
	"false": "false", "False": "false", "FALSE": "false", "off": "false", "Off": "false", "OFF": "false",
	"null": "null", "Null": "null", "NULL": "null",
}

// yamlWord looks s up in yamlWords. Most keys and words of a manifest
// are longer than any of those words or start with another letter, and
// are told apart without hashing them.
func yamlWord(s []byte) (string, bool) {
	if len(s) > maxYAMLWord || !yamlWordStart[s[0]] {
		return "", false
	}
	v, ok := yamlWords[string(s)]
	return v, ok
}

var (
	maxYAMLWord   int
	yamlWordStart [256]bool
)

func init() {
	for w := range yamlWords {
		maxYAMLWord = max(maxYAMLWord, len(w))
		yamlWordStart[w[0]] = true
	}
}

// appendASCII writes printable ASCII as a JSON string, as appendString
// would: only quotes and backslashes are escaped.
func appendASCII(b, s []byte) []byte {
	b = append(b, '"')
	for {
		i := 0
		for i < len(s) && s[i] != '"' && s[i] != '\\' {
			i++
		}
		b = append(b, s[:i]...)
		if i == len(s) {
			return append(b, '"')
		}
		b = append(b, '\\', s[i])
		s = s[i+1:]
	}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// keyByte marks the bytes a plain key may hold after its first letter;
// plainByte those of a plain value (':' only when not followed by a
// blank). Flow indicators are left out: go-yaml reads them differently in
// places, and they are rare in plain scalars.
var keyByte, plainByte [256]bool

func init() {
	for c := range 256 {
		b := byte(c)
		keyByte[c] = isLetter(b) || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.' || b == '/'
		plainByte[c] = b >= 0x20 && b <= 0x7e && !bytesContain("#,[]{}", b)
	}
}

func bytesContain(s string, b byte) bool {
	for i := range len(s) {
		if s[i] == b {
			return true
		}
	}
	return false
}
