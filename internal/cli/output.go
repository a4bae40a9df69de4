package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// encode prints objects the way kubectl get does: YAML documents separated
// by "---", or in JSON a single object, or a v1 List when there are several,
// so that the output is always one value kubectl apply -f - accepts.
func encode(w io.Writer, objs []any, format string) error {
	switch format {
	case "json":
		var v any = objs
		if len(objs) == 1 {
			v = objs[0]
		} else {
			if objs == nil {
				objs = []any{}
			}
			v = struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Items      []any  `json:"items"`
			}{"v1", "List", objs}
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "    ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("encoding JSON: %w", err)
		}
		_, err := w.Write(buf.Bytes())
		return err
	default:
		var buf bytes.Buffer
		for i, o := range objs {
			if i > 0 {
				buf.WriteString("---\n")
			}
			b, err := yaml.Marshal(o)
			if err != nil {
				return fmt.Errorf("encoding YAML: %w", err)
			}
			buf.Write(b)
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
}
