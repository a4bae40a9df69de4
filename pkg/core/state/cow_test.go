package state

import (
	"fmt"
	"maps"
	"math/rand"
	"strings"
	"testing"
)

// A cowMap behaves as a Go map, and a view never changes after it was
// taken, whatever is written later.
func TestCowMapViewsAreImmutable(t *testing.T) {
	t.Run("maphash", func(t *testing.T) { testCowMapViews(t, hashString) })
	// Keys that share their hash fill buckets that cannot split.
	t.Run("collisions", func(t *testing.T) {
		testCowMapViews(t, func(k string) uint64 { return uint64(len(k)%3) << 60 })
	})
}

func testCowMapViews(t *testing.T, hash func(string) uint64) {
	r := rand.New(rand.NewSource(1))
	m := newCowMap[string, int](hash)
	model := map[string]int{}
	type taken struct {
		v    cowView[string, int]
		want map[string]int
	}
	var views []taken
	for step := 0; step < 5000; step++ {
		k := fmt.Sprintf("k%d", r.Intn(1000))
		switch r.Intn(10) {
		case 0, 1, 2:
			m.del(k)
			delete(model, k)
		case 3:
			views = append(views, taken{m.freeze(), maps.Clone(model)})
		default:
			m.set(k, step)
			model[k] = step
		}
		if m.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, m.len(), len(model))
		}
	}
	views = append(views, taken{m.freeze(), maps.Clone(model)})
	for i, tk := range views {
		got := map[string]int{}
		tk.v.each(func(k string, v int) { got[k] = v })
		if !maps.Equal(got, tk.want) || tk.v.len() != len(tk.want) {
			t.Fatalf("view %d: %d entries, want %d (or different values)", i, len(got), len(tk.want))
		}
		for k, want := range tk.want {
			if v, ok := tk.v.get(k); !ok || v != want {
				t.Fatalf("view %d: %s = %d, %v; want %d", i, k, v, ok, want)
			}
		}
	}
}

func BenchmarkCowMapSetAfterFreeze(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			m := newCowMap[string, int](hashString)
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("node-%06d", i)
				m.set(keys[i], i)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				m.freeze()
				m.set(keys[i%n], i)
			}
		})
	}
}

// compareKeys orders as the strings "namespace/name" do.
func TestCompareKeys(t *testing.T) {
	parts := []string{"", "a", "a-b", "a/b", "ab", "b", "a.", "a0", "a\xff"}
	for _, xn := range parts {
		for _, xm := range parts {
			for _, yn := range parts {
				for _, ym := range parts {
					x, y := ClaimKey{Namespace: xn, Name: xm}, ClaimKey{Namespace: yn, Name: ym}
					want := strings.Compare(x.String(), y.String())
					if got := compareKeys(x, y); got != want {
						t.Fatalf("compareKeys(%q, %q) = %d, want %d", x, y, got, want)
					}
				}
			}
		}
	}
}
