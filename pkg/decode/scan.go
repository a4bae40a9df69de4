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
			i++
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
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return nil, false
		}
		end, escaped, ok := skipString(b, i)
		if !ok {
			return nil, false
		}
		key, ok := unquote(b[i:end], escaped)
		if !ok {
			return nil, false
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		vend, ok := skipValue(b, i)
		if !ok {
			return nil, false
		}
		members = append(members, member{key: key, val: b[i:vend]})
		i = skipSpace(b, vend)
		if i >= len(b) {
			return nil, false
		}
		if b[i] == '}' {
			return members, true
		}
		if b[i] != ',' {
			return nil, false
		}
		i = skipSpace(b, i+1)
	}
	return nil, false
}

// arrayElements lists the elements of a JSON array. ok is false when b is
// not an array.
func arrayElements(b []byte) (elems [][]byte, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return [][]byte{}, true
	}
	for i < len(b) {
		end, ok := skipValue(b, i)
		if !ok {
			return nil, false
		}
		elems = append(elems, b[i:end])
		i = skipSpace(b, end)
		if i >= len(b) {
			return nil, false
		}
		if b[i] == ']' {
			return elems, true
		}
		if b[i] != ',' {
			return nil, false
		}
		i = skipSpace(b, i+1)
	}
	return nil, false
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
