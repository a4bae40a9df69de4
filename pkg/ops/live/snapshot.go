package live

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/pkg/ops/manifest"
)

// SnapshotFile is one file Snapshot writes and how many objects it holds.
type SnapshotFile struct {
	Path    string
	Objects int
}

// Snapshot writes the objects to dir, one YAML file per kind
// (resourceslices.yaml, deviceclasses.yaml, resourceclaims.yaml,
// resourceclaimtemplates.yaml, nodes.yaml, pods.yaml), in the form every
// offline verb reads with -f dir. managedFields are dropped: they are the
// bulk of a large object and no verb reads them. Kinds without objects get
// no file.
func (o *Objects) Snapshot(dir string) ([]SnapshotFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := []struct {
		name string
		objs []any
	}{
		{"resourceslices.yaml", withoutManagedFields(o.Slices)},
		{"deviceclasses.yaml", withoutManagedFields(o.Classes)},
		{"resourceclaims.yaml", withoutManagedFields(o.Claims)},
		{"resourceclaimtemplates.yaml", withoutManagedFields(o.Templates)},
		{"devicetaintrules.yaml", withoutManagedFields(o.TaintRules)},
		{"nodes.yaml", withoutManagedFields(o.Nodes)},
		{"pods.yaml", withoutManagedFields(o.Pods)},
	}
	var out []SnapshotFile
	for _, f := range files {
		if len(f.objs) == 0 {
			continue
		}
		var buf bytes.Buffer
		if err := manifest.Write(&buf, f.objs, "yaml"); err != nil {
			return out, fmt.Errorf("%s: %w", f.name, err)
		}
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return out, err
		}
		out = append(out, SnapshotFile{Path: path, Objects: len(f.objs)})
	}
	return out, nil
}

// object is what every API type's pointer offers.
type object[T any] interface {
	*T
	metav1.Object
}

func withoutManagedFields[T any, P object[T]](in []P) []any {
	out := make([]any, len(in))
	for i, obj := range in {
		c := new(T)
		*c = *obj
		P(c).SetManagedFields(nil)
		out[i] = P(c)
	}
	return out
}
