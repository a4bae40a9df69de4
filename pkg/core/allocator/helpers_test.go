package allocator

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

type resourceQuantity = resource.Quantity

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func ptrUID(s string) *types.UID { u := types.UID(s); return &u }

func qs(q resource.Quantity) string { return q.String() }

// devHeld is what is held of one device.
type devHeld struct{ allocated, shareInUse bool }

// flatView lists every device and counter of the cluster in pool order,
// for tests that check results against the whole cluster.
type flatView struct {
	devs     []*devInfo
	held     []devHeld // per device
	poolOf   []int     // per device: index into ctrStart
	avail    []uint64
	ctrStart []int32 // per pool generation: index of its first counter in avail
}

func devKey(driver, pool, device string) string { return driver + "\x00" + pool + "\x00" + device }

func flatten(a *Allocator) flatView {
	var fv flatView
	for _, ps := range a.src.(*staticSource).all {
		for gi := range ps.t.gens {
			t, h := ps.gen(gi)
			pi := len(fv.ctrStart)
			fv.ctrStart = append(fv.ctrStart, int32(len(fv.avail)))
			for i := range t.nDevs {
				fv.devs = append(fv.devs, t.dev(i))
				fv.held = append(fv.held, devHeld{allocated: h.allocated(i), shareInUse: h.shareInUse(i)})
				fv.poolOf = append(fv.poolOf, pi)
			}
			for rel, c := range t.capacity {
				if k := int32(rel) - h.takeLo; k >= 0 && int(k) < len(h.take) {
					c -= h.take[k]
				}
				fv.avail = append(fv.avail, c)
			}
		}
	}
	return fv
}
