package bench

import (
	"strings"
	"testing"
)

func BenchmarkAllocate(b *testing.B) {
	for _, w := range All() {
		for _, v := range Variants {
			b.Run(strings.ReplaceAll(w.Name, " ", "_")+"/"+strings.ReplaceAll(v.Name, " ", "_"), Func(w, v))
		}
	}
}

// TestWorkloadsAgree checks that every workload has the same outcome and
// devices on upstream (experimental) and dractl, and that upstream's
// stable and experimental variants agree (timeouts are skipped).
func TestWorkloadsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	Timeout = 2 * Timeout / 10
	for _, w := range All() {
		var ref *string
		for _, v := range Variants {
			if v.Warm {
				continue
			}
			out, _, err := Probe(w, v)
			if err != nil {
				t.Logf("%s %s: %v", w.Name, v.Name, err)
				continue
			}
			if out.Kind == "timeout" {
				continue
			}
			s := out.String()
			if ref == nil {
				ref = &s
			} else if s != *ref {
				t.Errorf("%s: %s says %s, want %s", w.Name, v.Name, s, *ref)
			}
		}
	}
}
