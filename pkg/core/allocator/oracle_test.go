package allocator

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/pool"
)

// randomCase builds a small pool: one counter set, up to 6 devices with a
// colour and a random consumption, and one claim of up to 2 requests with
// an optional constraint.
func randomCase(r *rand.Rand) (*env, *resourcev1.ResourceClaim) {
	cs := at.Slice("c").Node("node-1").Count(2).Counters("set", "mem", fmt.Sprint(2+r.Intn(6)))
	ds := at.Slice("d").Node("node-1").Count(2)
	colors := []string{"red", "blue"}
	for i := 0; i < 1+r.Intn(6); i++ {
		d := at.Device(fmt.Sprintf("d%d", i)).Str("color", colors[r.Intn(2)]).Int("numa", int64(r.Intn(2)))
		if r.Intn(3) > 0 {
			d.Consumes("set", "mem", fmt.Sprint(1+r.Intn(3)))
		}
		ds.Device(d)
	}
	c := at.Claim("c")
	for i := 0; i < 1+r.Intn(2); i++ {
		req := at.Request(fmt.Sprintf("r%d", i), "any").Count(int64(1 + r.Intn(3)))
		if r.Intn(2) == 0 {
			req.Selector(fmt.Sprintf(`device.attributes["driver.example.com"].color == %q`, colors[r.Intn(2)]))
		}
		c.Request(req)
	}
	switch r.Intn(3) {
	case 1:
		c.MatchAttribute("driver.example.com/numa")
	case 2:
		c.DistinctAttribute("driver.example.com/numa")
	}
	return &env{slices: []*api.ResourceSlice{cs.Obj(), ds.Obj()}, classes: []*resourcev1.DeviceClass{anyClass}}, c.Obj()
}

// oracle enumerates every assignment of distinct devices to the claim's
// device slots and reports whether any satisfies selectors, counters and
// constraints. It shares only the device table with the search.
func oracle(t *testing.T, e *env, c *resourcev1.ResourceClaim) bool {
	a := e.alloc(t)
	fv := flatten(a)
	type slotT struct {
		req   int
		color string
	}
	var slots []slotT
	for i, req := range c.Spec.Devices.Requests {
		color := ""
		if len(req.Exactly.Selectors) > 0 {
			fmt.Sscanf(req.Exactly.Selectors[0].CEL.Expression, `device.attributes["driver.example.com"].color == %q`, &color)
		}
		for k := int64(0); k < req.Exactly.Count; k++ {
			slots = append(slots, slotT{i, color})
		}
	}
	var devs []int32
	for g := range fv.devs {
		if !fv.devs[g].sliceInfo().counters {
			devs = append(devs, int32(g))
		}
	}
	str := func(g int32, k string) string {
		v, _ := fv.devs[g].view.Attribute(api.QualifiedName(k))
		if v.StringValue != nil {
			return *v.StringValue
		}
		return fmt.Sprint(*v.IntValue)
	}
	used := map[int32]bool{}
	pick := make([]int32, len(slots))
	var rec func(i int) bool
	rec = func(i int) bool {
		if i == len(slots) {
			mem := uint64(0)
			for _, g := range pick {
				for _, u := range fv.devs[g].uses {
					mem += u.amt
				}
			}
			if mem > fv.avail[0] {
				return false
			}
			for _, con := range c.Spec.Devices.Constraints {
				seen := map[string]int{}
				for _, g := range pick {
					seen[str(g, "numa")]++
				}
				if con.MatchAttribute != nil && len(seen) > 1 {
					return false
				}
				if con.DistinctAttribute != nil && len(seen) != len(pick) {
					return false
				}
			}
			return true
		}
		for _, g := range devs {
			if used[g] || (slots[i].color != "" && str(g, "color") != slots[i].color) {
				continue
			}
			used[g] = true
			pick[i] = g
			ok := rec(i + 1)
			used[g] = false
			if ok {
				return true
			}
		}
		return false
	}
	return rec(0)
}

func TestOracle(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 400; i++ {
		e, c := randomCase(r)
		res, err := e.run(t, node1, c)
		if err != nil && !IsUnfit(err) {
			t.Fatalf("case %d: %v", i, err)
		}
		want := oracle(t, e, c)
		if (err == nil) != want {
			t.Fatalf("case %d: search says %v, oracle says %v", i, err == nil, want)
		}
		if err == nil {
			verify(t, e, node1, []*resourcev1.ResourceClaim{c}, res)
		}
		e.opts.Strategy = BestFit
		if _, err := e.run(t, node1, c); (err == nil) != want {
			t.Fatalf("case %d best fit: %v, oracle says %v", i, err, want)
		}
	}
}

func FuzzAllocate(f *testing.F) {
	f.Add(int64(1))
	f.Add(int64(42))
	f.Fuzz(func(t *testing.T, seed int64) {
		e, c := randomCase(rand.New(rand.NewSource(seed)))
		a, err := New(Input{Pools: pool.Assemble(e.slices), Classes: e.classes}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = a.Allocate(context.Background(), node1, []*resourcev1.ResourceClaim{c})
	})
}
