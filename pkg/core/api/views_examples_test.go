package api_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
)

// TestViewsAgreeWithFlattenOnExamples holds the lazy views against Flatten
// for every device and counter set of every example, as read from disk.
func TestViewsAgreeWithFlattenOnExamples(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "*"))
	if err != nil {
		t.Fatal(err)
	}
	slices := 0
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		objs, err := decode.Paths([]string{dir}, nil)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, o := range objs {
			if s, ok := o.Obj.(*api.ResourceSlice); ok {
				checkViews(t, o.Source.String(), s)
				slices++
			}
		}
	}
	if slices < 10 {
		t.Fatalf("checked only %d example slices; examples/ is missing or moved", slices)
	}
}
