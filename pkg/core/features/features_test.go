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

// TestEveryGateHasAStage: the CLI's --feature-gates and its --help are
// built from this package alone, so a gate without a stage would be
// unusable.
func TestEveryGateHasAStage(t *testing.T) {
	for _, g := range append(Gates(), SchedulerGates()...) {
		if _, ok := StageOf(g); !ok {
			t.Errorf("gate %s has no stage", g)
		}
	}
	if _, ok := StageOf("DRANoSuchGate"); ok {
		t.Error("an unknown gate has a stage")
	}
	if len(stages) != len(gates)+len(schedulerGates) {
		t.Errorf("%d stages for %d gates: a stage names a gate no list holds", len(stages), len(gates)+len(schedulerGates))
	}
	for _, g := range SchedulerGates() {
		if Known(g) {
			t.Errorf("scheduler gate %s is also an allocator gate", g)
		}
	}
}
