package decode

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/dractl/dractl/pkg/api"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

// Encode writes objects as "yaml" (documents separated by "---" lines) or
// "json" (the object itself, or a v1 List when there are several or none).
// objs may hold the pointer types of Object.Obj, *resourcev1.ResourceSlice,
// Object values, or json.RawMessage (an object as written, such as
// Object.Raw, printed with its content unchanged). Empty apiVersion and kind
// are filled in on a copy; the objects themselves are not changed.
func Encode(w io.Writer, objs []any, format string) error {
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
			var b []byte
			var err error
			if raw, ok := o.(json.RawMessage); ok {
				b, err = yaml.JSONToYAML(raw)
			} else {
				b, err = yaml.Marshal(o)
			}
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

// withTypeMeta returns a shallow copy of o with apiVersion and kind set.
func withTypeMeta(o any) (any, error) {
	switch v := o.(type) {
	case json.RawMessage:
		return v, nil
	case Object:
		return withTypeMeta(v.Obj)
	case *Object:
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
