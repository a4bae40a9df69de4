package decode

import (
	"testing"

	"github.com/dractl/dractl/pkg/core/api"
)

func TestGroup(t *testing.T) {
	objs, err := Paths([]string{"testdata"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := Group(objs)
	counts := map[string][2]int{
		"slices":    {len(s.Slices), 3},
		"classes":   {len(s.Classes), 1},
		"claims":    {len(s.Claims), 1},
		"templates": {len(s.ClaimTemplates), 1},
		"nodes":     {len(s.Nodes), 1},
		"pods":      {len(s.Pods), 1},
	}
	for what, c := range counts {
		if c[0] != c[1] {
			t.Errorf("%d %s, want %d", c[0], what, c[1])
		}
	}
	if len(s.Sources) != len(objs) {
		t.Errorf("%d sources for %d objects", len(s.Sources), len(objs))
	}
	src, ok := s.Source(s.Slices[1])
	if !ok || src.String() != "testdata/slicelist.json#1 items[1]" {
		t.Errorf("source of second slice = %v, %v", src, ok)
	}
	if _, ok := s.Source(&api.ResourceSlice{}); ok {
		t.Error("unknown object has a source")
	}
}

// TestEncodeYAMLNonPrintable: strings may hold characters that YAML does
// not allow unescaped (DEL, C1 controls, U+FFFE); the YAML written must
// escape them and read back as the same strings.
