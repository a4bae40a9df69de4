package allocator

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// verify checks a successful allocation independently of the search:
// counts, selectors, node, no device used twice, counters never exceeded,
// and every constraint holding over the devices it covers.
func verify(t testing.TB, e *env, node *corev1.Node, cls []*resourcev1.ResourceClaim, res []*resourcev1.AllocationResult) {
	t.Helper()
	a := e.alloc(t)
	fv := flatten(a)
	byKey := map[string]int32{}
	for g := range fv.devs {
		d := fv.devs[g]
		p := d.t.p
		byKey[devKey(p.Driver, p.Pool, d.d.Name)] = int32(g)
	}
	used := make([]uint64, len(fv.avail))
	taken := map[int32]bool{}
	sharedSeen := map[int32]bool{}
	for g := range fv.devs {
		if fv.held[g].allocated {
			taken[int32(g)] = true
		}
	}
	for ci, c := range cls {
		r := res[ci]
		perReq := map[string][]int32{}
		for _, dr := range r.Devices.Results {
			g, ok := byKey[devKey(dr.Driver, dr.Pool, dr.Device)]
			if !ok {
				t.Fatalf("unknown device %s", dr.Device)
			}
			d := fv.devs[g]
			admin := ptr.Deref(dr.AdminAccess, false)
			if !d.multi && !admin {
				if taken[g] {
					t.Fatalf("device %s used twice", dr.Device)
				}
				taken[g] = true
			}
			if !d.multi || (!fv.held[g].shareInUse && !sharedSeen[g]) {
				sharedSeen[g] = true
				for _, u := range d.uses {
					used[fv.ctrStart[fv.poolOf[g]]+u.rel] += u.amt
				}
			}
			perReq[dr.Request] = append(perReq[dr.Request], g)
			if d.perDevice() {
				if ok, _ := d.node.matches(node); !ok {
					t.Fatalf("device %s not on node", dr.Device)
				}
			}
		}
		for _, req := range c.Spec.Devices.Requests {
			name, ex := req.Name, req.Exactly
			var cls string
			var sels []resourcev1.DeviceSelector
			var mode resourcev1.DeviceAllocationMode
			var count int64
			if ex != nil {
				cls, sels, mode, count = ex.DeviceClassName, ex.Selectors, ex.AllocationMode, ex.Count
			} else {
				for _, s := range req.FirstAvailable {
					if len(perReq[req.Name+"/"+s.Name]) > 0 {
						name, cls, sels, mode, count = req.Name+"/"+s.Name, s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count
					}
				}
			}
			got := perReq[name]
			if mode == resourcev1.DeviceAllocationModeExactCount && int64(len(got)) != count {
				t.Fatalf("request %s: %d devices, want %d", name, len(got), count)
			}
			exprs := append([]resourcev1.DeviceSelector{}, a.src.Class(cls).Spec.Selectors...)
			exprs = append(exprs, sels...)
			for _, g := range got {
				for _, s := range exprs {
					d := fv.devs[g]
					e := a.exprs.selector(a.opts.Compiler, s.CEL.Expression)
					ok, err := eval(context.Background(), e, d.t.selColumn(e), d)
					if err != nil || !ok {
						t.Fatalf("request %s: device %s fails %q: %v", name, fv.devs[g].d.Name, s.CEL.Expression, err)
					}
				}
			}
		}
		for _, con := range c.Spec.Devices.Constraints {
			var vals []*attrVal
			for rn, gs := range perReq {
				if len(con.Requests) > 0 && !containsReq(con.Requests, rn) {
					continue
				}
				for _, g := range gs {
					attr := ""
					if con.MatchAttribute != nil {
						attr = string(*con.MatchAttribute)
					} else {
						attr = string(*con.DistinctAttribute)
					}
					v := (&constraintState{name: attr}).attr(fv.devs[g])
					if v == nil {
						t.Fatalf("device %s lacks %s", fv.devs[g].d.Name, attr)
					}
					vals = append(vals, v)
				}
			}
			if con.MatchAttribute != nil && len(vals) > 0 {
				cur := vals[0]
				for _, v := range vals[1:] {
					if cur = cur.intersect(v); cur == nil {
						t.Fatalf("matchAttribute %s violated", *con.MatchAttribute)
					}
				}
			}
			if con.DistinctAttribute != nil {
				for i := range vals {
					for j := i + 1; j < len(vals); j++ {
						if vals[i].overlaps(vals[j]) {
							t.Fatalf("distinctAttribute %s violated", *con.DistinctAttribute)
						}
					}
				}
			}
		}
	}
	for c := range used {
		if used[c] > fv.avail[c] {
			t.Fatalf("counter %d exceeded: %d > %d", c, used[c], fv.avail[c])
		}
	}
}

func containsReq(names []string, rn string) bool {
	for _, n := range names {
		if n == rn || strings.HasPrefix(rn, n+"/") {
			return true
		}
	}
	return false
}
