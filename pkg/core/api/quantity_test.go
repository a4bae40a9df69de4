package api

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestCounterInRangeShortcut: the int64 shortcut decides every quantity
// as the full check does.
func TestCounterInRangeShortcut(t *testing.T) {
	for _, s := range []string{
		"0", "1", "-1", "-0", "7", "132", "80Gi", "9984Mi", "100m", "1n", "-1n", "0.5", "1.5Gi", "1e3", "1e-3", "1e9",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "18446744073709551616", "8Ei", "16Ei", "1e18", "1e19", "1e20", "1e30", "1e31", "1e-9", "1e-10",
		"999999999999999999999999999999", "1000000000000000000000000000001", "1Ki", "1k", "1M", "1E", "1P", "-1Gi",
	} {
		q := resource.MustParse(s)
		if got, want := CounterInRange(q), counterInRangeSlow(q); got != want {
			t.Errorf("CounterInRange(%s) = %v, the full check says %v", s, got, want)
		}
	}
}

func TestCounterInRangeAllocatesNothingForIntegers(t *testing.T) {
	q := resource.MustParse("80Gi")
	if n := testing.AllocsPerRun(100, func() { CounterInRange(q) }); n != 0 {
		t.Errorf("CounterInRange(80Gi) allocates %v times", n)
	}
}
