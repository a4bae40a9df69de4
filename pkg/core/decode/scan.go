package decode

import (
	"bytes"
	"encoding/json"
)

// The helpers below split JSON that is already known to be valid (it came
// out of encoding/json's stream decoder or out of our YAML conversion) into
// top-level members and array elements. They only skip over values, which
// is far cheaper than decoding them, so that finding a document's kind or a
// list's items does not cost a second full parse. They still check bounds
// everywhere: malformed input yields ok=false, never a panic.

type member struct {
	key string
	val []byte
	// elems lists the elements of val when isArray (only filled in by
	// scanObject with arrays).
	elems   [][]byte
	isArray bool
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i]=='"'.
func skipString(b []byte, i int) (end int, escaped, ok bool) {
	for i++; i < len(b); i++ {
		// Runs of ordinary bytes are the bulk of every string.
		for i < len(b) && !stringStop[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped, true
		}
	}
	return 0, false, false
}

// stringStop marks the bytes that end a run inside a string; valueStop
// the bytes that matter when skipping over an object or array.
var stringStop, valueStop [256]bool

func init() {
	stringStop['"'], stringStop['\\'] = true, true
	for _, c := range []byte(`"{}[]`) {
		valueStop[c] = true
	}
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		end, _, ok := skipString(b, i)
		return end, ok
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, _, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			for i++; i < len(b) && !valueStop[b[i]]; i++ {
			}
		}
		return 0, false
	default:
		start := i
		for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
			i++
		}
		return i, i > start
	}
}

func unquote(raw []byte, escaped bool) (string, bool) {
	if !escaped {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// objectMembers lists the members of a JSON object in order, duplicates
// included. ok is false when b is not an object.
func objectMembers(b []byte) (members []member, ok bool) {
	members, _, ok = scanObject(b, skipSpace(b, 0), false)
	return members, ok
}

// scanObject lists the members of the object starting at b[i] and returns
// the index just past it. With arrays, the elements of members whose
// values are arrays are listed too (member.elems), in the same pass.
func scanObject(b []byte, i int, arrays bool) (members []member, end int, ok bool) {
	if i >= len(b) || b[i] != '{' {
		return nil, 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, i + 1, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return nil, 0, false
		}
		end, escaped, ok := skipString(b, i)
		if !ok {
			return nil, 0, false
		}
		key, ok := unquote(b[i:end], escaped)
		if !ok {
			return nil, 0, false
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, 0, false
		}
		i = skipSpace(b, i+1)
		m := member{key: key}
		var vend int
		if arrays && i < len(b) && b[i] == '[' {
			m.elems, vend, ok = scanArray(b, i)
			m.isArray = ok
		}
		if !m.isArray {
			if vend, ok = skipValue(b, i); !ok {
				return nil, 0, false
			}
		}
		m.val = b[i:vend]
		members = append(members, m)
		i = skipSpace(b, vend)
		if i >= len(b) {
			return nil, 0, false
		}
		if b[i] == '}' {
			return members, i + 1, true
		}
		if b[i] != ',' {
			return nil, 0, false
		}
		i = skipSpace(b, i+1)
	}
	return nil, 0, false
}

// countElements returns the number of elements of the array b (0 when b
// is not an array).
func countElements(b []byte) int {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return 0
	}
	n := 0
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; n++ {
		end, ok := skipValue(b, i)
		if !ok {
			return n
		}
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return n
}

// arrayElements lists the elements of a JSON array. ok is false when b is
// not an array.
func arrayElements(b []byte) (elems [][]byte, ok bool) {
	elems, _, ok = scanArray(b, skipSpace(b, 0))
	return elems, ok
}

// scanArray lists the elements of the array starting at b[i] and returns
// the index just past it.
func scanArray(b []byte, i int) (elems [][]byte, end int, ok bool) {
	if i >= len(b) || b[i] != '[' {
		return nil, 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return [][]byte{}, i + 1, true
	}
	for i < len(b) {
		end, ok := skipValue(b, i)
		if !ok {
			return nil, 0, false
		}
		elems = append(elems, b[i:end])
		i = skipSpace(b, end)
		if i >= len(b) {
			return nil, 0, false
		}
		if b[i] == ']' {
			return elems, i + 1, true
		}
		if b[i] != ',' {
			return nil, 0, false
		}
		i = skipSpace(b, i+1)
	}
	return nil, 0, false
}

// jsonType names the JSON type of a valid value, for error messages.
func jsonType(b []byte) string {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// stringValue returns the string held by a JSON value, or ok=false when
// the value is not a string.
func stringValue(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' {
		return "", false
	}
	end, escaped, ok := skipString(b, 0)
	if !ok || end != len(b) {
		return "", false
	}
	return unquote(b, escaped)
}
