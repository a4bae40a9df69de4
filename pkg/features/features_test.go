package features

import "testing"

func TestSet(t *testing.T) {
	var zero Set
	for _, g := range Gates() {
		if !zero.Enabled(g) {
			t.Errorf("zero Set: %s off, want every gate on", g)
		}
		if None().Enabled(g) {
			t.Errorf("None: %s on", g)
		}
	}
	s := All().With(ConsumableCapacity, false).With(FractionalCapacityRange, false)
	if s.Enabled(ConsumableCapacity) || s.Enabled(FractionalCapacityRange) || !s.Enabled(AdminAccess) {
		t.Errorf("With: %s", s)
	}
	if got, want := s.String(), "DRAConsumableCapacity=false,DRAFractionalCapacityRange=false"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if s.With(ConsumableCapacity, true).Enabled(ConsumableCapacity) != true {
		t.Error("With(true) did not turn the gate back on")
	}
	if All().With("DRANoSuchGate", false) != All() || All().Enabled("DRANoSuchGate") || Known("DRANoSuchGate") {
		t.Error("unknown gates must be off and ignored")
	}
	for g, deps := range Dependencies {
		for _, d := range append(deps, g) {
			if !Known(d) {
				t.Errorf("dependency names unknown gate %s", d)
			}
		}
	}
}
