package diff

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dractl/dractl/conformance/gen"
	"github.com/dractl/dractl/conformance/scenario"
)

// Generation is reproducible and scenarios survive a YAML round trip.
func TestGenerateReproducibleAndRoundTrip(t *testing.T) {
	for i := 0; i < 20; i++ {
		a, _ := gen.Generate(7, i).Marshal(nil)
		b, _ := gen.Generate(7, i).Marshal(nil)
		if !bytes.Equal(a, b) {
			t.Fatalf("scenario %d not reproducible", i)
		}
		sc, err := scenario.Unmarshal(a)
		if err != nil {
			t.Fatalf("scenario %d: %v", i, err)
		}
		c, _ := sc.Marshal(nil)
		if !bytes.Equal(a, c) {
			t.Fatalf("scenario %d: YAML round trip changed it", i)
		}
	}
}

// regressions is the one directory of stored scenarios; pkg/core/allocator
// replays them too, without upstream.
const regressions = "../../pkg/core/allocator/testdata/regressions"

// TestRegressions replays every stored disagreement. Each file fails until
// pkg/core/allocator (or this harness) is fixed; its header says what upstream
// expects.
func TestRegressions(t *testing.T) {
	files, _ := filepath.Glob(regressions + "/*.yaml")
	if len(files) == 0 {
		t.Fatalf("no stored scenarios in %s", regressions)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := scenario.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), sc, "", Options{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Signature != "" {
					t.Errorf("node %s: %s: %s", r.Node, r.Signature, r.Detail)
				}
			}
		})
	}
}
