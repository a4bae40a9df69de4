package manifest

import (
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

// Write writes objects as "yaml" (documents separated by "---" lines) or
// "json" (the object itself, or a v1 List when there are several or none).
// objs may hold the pointer types of decode.Object.Obj, *resourcev1.ResourceSlice,
// decode.Object values, or json.RawMessage (an object as written, such as
// decode.Object.Raw, printed with its content unchanged). Empty apiVersion and kind
// are filled in on a copy; the objects themselves are not changed.
func Write(w io.Writer, objs []any, format string) error {
	typed := make([]any, len(objs))
	for i, o := range objs {
		t, err := withTypeMeta(o)
		if err != nil {
			return fmt.Errorf("encode object %d: %w", i, err)
		}
		typed[i] = t
	}
	switch format {
	case "yaml":
		for i, o := range typed {
			j, ok := o.(json.RawMessage)
			if !ok {
				var err error
				if j, err = json.Marshal(o); err != nil {
					return fmt.Errorf("encode object %d: %w", i, err)
				}
			}
			b, err := yaml.JSONToYAML(escapeNonPrintable(j))
			if err != nil {
				return fmt.Errorf("encode object %d: %w", i, err)
			}
			if i > 0 {
				if _, err := io.WriteString(w, "---\n"); err != nil {
					return err
				}
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	case "json":
		var v any = struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Items      []any  `json:"items"`
		}{"v1", "List", typed}
		if len(typed) == 1 {
			v = typed[0]
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		_, err = w.Write(append(b, '\n'))
		return err
	default:
		return fmt.Errorf("unknown output format %q; expected yaml or json", format)
	}
}

const hexDigits = "0123456789abcdef"

// escapeNonPrintable writes as \u escapes the characters that JSON allows
// unescaped in strings but YAML 1.1 reads differently: DEL, the C1
// controls, U+FFFE and U+FFFF are not allowed in a stream at all, and NEL,
// U+2028 and U+2029 are line breaks. JSONToYAML reads JSON as YAML and would
// reject or fold them. Outside strings valid JSON has
// none of them, so every occurrence is inside a string. The YAML written
// then quotes and escapes them, and reads back as the same string.
func escapeNonPrintable(j []byte) []byte {
	var out []byte
	start := 0
	for i := 0; i < len(j); i++ {
		// Byte patterns of U+007F, U+0080..U+009F, U+2028/U+2029 and
		// U+FFFE/U+FFFF; lead
		// bytes never occur inside another character's encoding.
		n := 0
		switch c := j[i]; {
		case c == 0x7f:
			n = 1
		case c == 0xc2 && i+1 < len(j) && j[i+1] >= 0x80 && j[i+1] <= 0x9f:
			n = 2
		case c == 0xe2 && i+2 < len(j) && j[i+1] == 0x80 && (j[i+2] == 0xa8 || j[i+2] == 0xa9):
			n = 3
		case c == 0xef && i+2 < len(j) && j[i+1] == 0xbf && j[i+2] >= 0xbe:
			n = 3
		default:
			continue
		}
		r, _ := utf8.DecodeRune(j[i : i+n])
		out = append(out, j[start:i]...)
		out = append(out, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		i += n - 1
		start = i + 1
	}
	if out == nil {
		return j
	}
	return append(out, j[start:]...)
}

// withTypeMeta returns a shallow copy of o with apiVersion and kind set.
func withTypeMeta(o any) (any, error) {
	switch v := o.(type) {
	case json.RawMessage:
		return v, nil
	case decode.Object:
		return withTypeMeta(v.Obj)
	case *decode.Object:
		return withTypeMeta(v.Obj)
	case *api.ResourceSlice:
		c := *v
		fill(&c.APIVersion, &c.Kind, api.APIVersion, api.KindSlice)
		return &c, nil
	case *resourcev1.ResourceSlice:
		c := *v
		fill(&c.APIVersion, &c.Kind, api.APIVersion, api.KindSlice)
		return &c, nil
	case *resourcev1.DeviceClass:
		c := *v
		fill(&c.APIVersion, &c.Kind, api.APIVersion, "DeviceClass")
		return &c, nil
	case *resourcev1.ResourceClaim:
		c := *v
		fill(&c.APIVersion, &c.Kind, api.APIVersion, "ResourceClaim")
		return &c, nil
	case *resourcev1.ResourceClaimTemplate:
		c := *v
		fill(&c.APIVersion, &c.Kind, api.APIVersion, "ResourceClaimTemplate")
		return &c, nil
	case *resourcev1.DeviceTaintRule:
		c := *v
		fill(&c.APIVersion, &c.Kind, api.APIVersion, "DeviceTaintRule")
		return &c, nil
	case *corev1.Node:
		c := *v
		fill(&c.APIVersion, &c.Kind, "v1", "Node")
		return &c, nil
	case *corev1.Pod:
		c := *v
		fill(&c.APIVersion, &c.Kind, "v1", "Pod")
		return &c, nil
	default:
		return nil, fmt.Errorf("unsupported type %T", o)
	}
}

func fill(apiVersion, kind *string, av, k string) {
	if *apiVersion == "" {
		*apiVersion = av
	}
	if *kind == "" {
		*kind = k
	}
}
