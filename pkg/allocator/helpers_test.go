package allocator

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

type resourceQuantity = resource.Quantity

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func ptrUID(s string) *types.UID { u := types.UID(s); return &u }

func qs(q resource.Quantity) string { return q.String() }

// flatView lists every device and counter of the cluster in pool order,
// for tests that check results against the whole cluster.
type flatView struct {
	devs     []*devInfo
	avail    []uint64
	ctrStart []int32 // per pool: index of its first counter in avail
}

func devKey(driver, pool, device string) string { return driver + "\x00" + pool + "\x00" + device }

func flatten(a *Allocator) flatView {
	var fv flatView
	for pi := range a.pools {
		t := a.table(int32(pi))
		fv.ctrStart = append(fv.ctrStart, int32(len(fv.avail)))
		for i := range t.devs {
			fv.devs = append(fv.devs, t.dev(int32(i)))
		}
		fv.avail = append(fv.avail, t.avail...)
	}
	return fv
}
