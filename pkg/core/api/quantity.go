package api

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The range of quantities dractl computes with. A quantity's decimal
// exponent is unbounded ("1e100000000" parses), and comparing or adding
// two quantities of very different exponents materializes a number with
// as many digits as the exponent: minutes and gigabytes for one
// comparison. Upstream's allocator does exactly that and does not finish.
// No device has counters or capacities outside this range, so dractl
// rejects such values instead of computing with them.
const (
	// MaxQuantity is the largest magnitude: 10^30, far beyond any memory,
	// bandwidth or count a device declares; comparing quantities up to it
	// takes microseconds.
	MaxQuantity = 1e30
	// MinQuantity is the smallest non-zero magnitude: 10^-9 (1n), the
	// finest suffix a quantity can carry.
	MinQuantity = 1e-9
)

// QuantityInRange reports whether q is zero or has a magnitude between
// MinQuantity and MaxQuantity. It reads q without converting it, so it
// takes constant time for any exponent and is safe for concurrent use.
func QuantityInRange(q resource.Quantity) bool {
	if _, ok := q.AsInt64(); ok {
		// Nearly every quantity: a whole number that fits an int64 is
		// zero or between 1 and about 9.2e18.
		return true
	}
	if q.IsZero() {
		return true
	}
	f := math.Abs(q.AsApproximateFloat64())
	return f >= MinQuantity && f <= MaxQuantity
}

// maxCounter is the largest counter value or consumption: the allocator
// adds and compares them as unsigned 64-bit integers of whole units.
var maxCounter = resource.MustParse("18446744073709551615")

// CounterInRange reports whether q can be a counter's value or a device's
// consumption of one: QuantityInRange, not negative, and at most 2^64-1
// (16 Ei of bytes).
func CounterInRange(q resource.Quantity) bool {
	if v, ok := q.AsInt64(); ok {
		// Nearly every counter: an int64 is within MaxQuantity and below
		// maxCounter, and deciding so needs no conversion (Cmp against
		// maxCounter converts q to an inf.Dec, allocating).
		return v >= 0
	}
	return counterInRangeSlow(q)
}

func counterInRangeSlow(q resource.Quantity) bool {
	return QuantityInRange(q) && q.Sign() >= 0 && q.Cmp(maxCounter) <= 0
}
