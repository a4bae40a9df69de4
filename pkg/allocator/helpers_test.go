package allocator

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

type resourceQuantity = resource.Quantity

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func ptrUID(s string) *types.UID { u := types.UID(s); return &u }

func qs(q resource.Quantity) string { return q.String() }
