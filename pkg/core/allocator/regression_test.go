package allocator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/pool"
)

// TestRegressions replays the disagreements the conformance harness found
// (copied from conformance/testdata/regressions). Each file's header
// records upstream's answer: "# expect-node:", "# expect: fit|unfit|fatal"
// and, for fit, "# expect-devices:" in the harness's DescribeResults form;
// "# expect-max-nodes:" bounds the search work (Stats) where it once
// exploded.
func TestRegressions(t *testing.T) {
	files, err := filepath.Glob("testdata/regressions/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no regression files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			hdr := readHeader(t, f)
			a, node, pending := loadRegression(t, f, hdr["expect-node"])
			res, err := a.Allocate(context.Background(), node, pending)
			if limit, err := strconv.ParseInt(hdr["expect-max-nodes"], 10, 64); err == nil {
				// Scenarios where the search once exploded must stay small,
				// not merely finish. Work is counted, not timed: a busy
				// machine or -race changes the time, not the work.
				st := a.Stats()
				if n := st.SearchNodes + st.ProbeNodes; n > limit {
					t.Errorf("searched %d nodes (%d + %d probing), budget %d", n, st.SearchNodes, st.ProbeNodes, limit)
				}
			}
			var u *UnfitError
			var fe *FatalError
			got := "fit"
			switch {
			case errors.As(err, &u):
				got = "unfit"
			case errors.As(err, &fe):
				got = "fatal"
			case err != nil:
				t.Fatalf("neither unfit nor fatal: %v", err)
			}
			if got != hdr["expect"] {
				t.Fatalf("outcome %s (%v), want %s", got, err, hdr["expect"])
			}
			if got == "fit" {
				if d := describe(res); d != hdr["expect-devices"] {
					t.Errorf("devices %s, want %s", d, hdr["expect-devices"])
				}
			}
		})
	}
}

// BenchmarkSlowRegressions times the scenarios where the search once
// exploded (files with "# expect-max-nodes:").
func BenchmarkSlowRegressions(b *testing.B) {
	files, _ := filepath.Glob("testdata/regressions/*.yaml")
	for _, f := range files {
		hdr := readHeader(b, f)
		if hdr["expect-max-nodes"] == "" {
			continue
		}
		b.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(b *testing.B) {
			a, node, pending := loadRegression(b, f, hdr["expect-node"])
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_, _ = a.Allocate(ctx, node, pending)
			}
		})
	}
}

// loadRegression builds an allocator over a regression file and returns it
// with the node and the pending claims.
func loadRegression(tb testing.TB, f, nodeName string) (*Allocator, *corev1.Node, []*resourcev1.ResourceClaim) {
	tb.Helper()
	objs, err := decode.Paths([]string{f}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	set := decode.Group(objs)
	var allocated, pending []*resourcev1.ResourceClaim
	for _, c := range set.Claims {
		if c.Status.Allocation != nil {
			allocated = append(allocated, c)
		} else {
			pending = append(pending, c)
		}
	}
	var node *corev1.Node
	for _, n := range set.Nodes {
		if n.Name == nodeName {
			node = n
		}
	}
	if node == nil {
		tb.Fatalf("node %q not in file", nodeName)
	}
	n := 0
	a, err := New(Input{Pools: pool.Assemble(set.Slices), Classes: set.Classes, Allocated: allocated},
		Options{NewShareID: func() types.UID { n++; return types.UID(fmt.Sprint(n)) }})
	if err != nil {
		tb.Fatal(err)
	}
	return a, node, pending
}

func readHeader(t testing.TB, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "# ")
		if !ok {
			break
		}
		if k, v, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(k, "expect") {
			out[k] = v
		}
	}
	if out["expect"] == "" || out["expect-node"] == "" {
		t.Fatalf("%s: header lacks expect/expect-node", path)
	}
	return out
}

// describe renders results as the harness does: "[req=pool/dev,...]" per
// claim, separated by spaces, "(admin)" after admin-access devices.
func describe(rs []*resourcev1.AllocationResult) string {
	var parts []string
	for _, r := range rs {
		var ds []string
		for _, d := range r.Devices.Results {
			s := d.Request + "=" + d.Pool + "/" + d.Device
			if d.AdminAccess != nil && *d.AdminAccess {
				s += "(admin)"
			}
			ds = append(ds, s)
		}
		parts = append(parts, "["+strings.Join(ds, ",")+"]")
	}
	return strings.Join(parts, " ")
}
